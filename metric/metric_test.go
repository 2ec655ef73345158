package metric_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/metric"
)

var answered = metric.Family{Name: "proxydhcp_answered_total", Help: "Replies sent.", Labels: []string{"port"}}

func TestFamilySample(t *testing.T) {
	s := answered.Sample(7, "67")
	want := metric.Sample{Name: "proxydhcp_answered_total", Help: "Replies sent.", Labels: []metric.Label{{Name: "port", Value: "67"}}, Value: 7}
	if d := cmp.Diff(want, s); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if s.Label("port") != "67" || s.Label("reason") != "" {
		t.Errorf("Label: port %q reason %q", s.Label("port"), s.Label("reason"))
	}
	defer func() {
		if recover() == nil {
			t.Error("a sample with too few label values did not panic")
		}
	}()
	answered.Sample(1)
}

func TestWith(t *testing.T) {
	in := []metric.Sample{answered.Sample(1, "67")}
	out := metric.With(metric.Label{Name: "listener", Value: "http"}, in)
	if got := strings.Join(out[0].LabelNames(), ","); got != "listener,port" {
		t.Errorf("label names %q, want listener,port", got)
	}
	if got := strings.Join(out[0].LabelValues(), ","); got != "http,67" {
		t.Errorf("label values %q, want http,67", got)
	}
	if len(in[0].Labels) != 1 {
		t.Errorf("With changed its input: %v", in[0].Labels)
	}
}

func TestCheck(t *testing.T) {
	gauge := metric.Family{Name: "tftp_waiting", Help: "Waiting.", Kind: metric.Gauge}
	for _, tc := range []struct {
		name    string
		samples []metric.Sample
		want    []string // problems, by family name
	}{
		{"good", []metric.Sample{answered.Sample(1, "67"), answered.Sample(2, "4011"), gauge.Sample(3)}, nil},
		{"counter without _total", []metric.Sample{{Name: "tftp_bytes", Help: "x"}}, []string{"tftp_bytes"}},
		{"gauge with _total", []metric.Sample{{Name: "tftp_open_total", Help: "x", Kind: metric.Gauge}}, []string{"tftp_open_total"}},
		{"upper case", []metric.Sample{{Name: "Tftp_total", Help: "x"}}, []string{"Tftp_total"}},
		{"no help", []metric.Sample{{Name: "tftp_total"}}, []string{"tftp_total"}},
		{"bad label", []metric.Sample{{Name: "tftp_total", Help: "x", Labels: []metric.Label{{Name: "Port"}}}}, []string{"tftp_total"}},
		{"labels disagree", []metric.Sample{answered.Sample(1, "67"), {Name: answered.Name, Help: answered.Help}}, []string{answered.Name}},
		{"help disagrees", []metric.Sample{gauge.Sample(1), {Name: gauge.Name, Help: "other", Kind: metric.Gauge}}, []string{gauge.Name, gauge.Name}},
		{"twice", []metric.Sample{answered.Sample(1, "67"), answered.Sample(2, "67")}, []string{answered.Name}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := metric.Check(tc.samples)
			var got []string
			for _, e := range unjoin(err) {
				var ce *metric.CheckError
				if !errors.As(e, &ce) {
					t.Fatalf("%v is no *CheckError", e)
				}
				got = append(got, ce.Name)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("problems (-want +got):\n%s\n%v", d, err)
			}
		})
	}
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
