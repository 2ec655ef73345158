package oteltrace_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/bootevents/oteltrace"
	"github.com/bettercompute/siteboot/hwid"
)

// NewOTLP's provider sends the spans to an OTLP/HTTP collector on Shutdown. The collector
// here is a loopback HTTP server that records what it is sent (no real collector runs in
// these tests); the body is OTLP's protobuf, in which the attribute strings appear as is.
func TestNewOTLP(t *testing.T) {
	got := make(chan string, 4)
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.URL.Path + " " + r.Header.Get("Content-Type") + " " + string(b)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer col.Close()
	tp, err := oteltrace.NewOTLP(t.Context(), oteltrace.OTLPConfig{Endpoint: strings.TrimPrefix(col.URL, "http://"), Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	s := oteltrace.New(oteltrace.Config{Tracer: tp.Tracer(oteltrace.TracerName)})
	s.Emit(bootevents.Event{MAC: hwid.MustParseMAC("52:54:00:00:00:92"), Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK, BootID: bootevents.BootIDOf("n")})
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	body := <-got
	for _, want := range []string{"/v1/traces application/x-protobuf", "siteboot.dhcpv4", "52:54:00:00:00:92", bootevents.BootIDOf("n").String(), "siteboot"} {
		if !strings.Contains(body, want) {
			t.Errorf("OTLP body lacks %q", want)
		}
	}
	if _, err := oteltrace.NewOTLP(t.Context(), oteltrace.OTLPConfig{}); err == nil {
		t.Errorf("NewOTLP without an endpoint did not fail")
	}
}
