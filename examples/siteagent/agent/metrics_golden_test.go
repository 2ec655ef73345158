package agent_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// seriesRE is a sample line of the Prometheus text format: the series and its value.
var seriesRE = regexp.MustCompile(`^([a-z0-9_]+(?:\{[^}]*\})?) \S+$`)

// metricShape is what /metrics and the status report name, without their values: every
// HELP and TYPE line, every series (name and labels), and every key of Agent.Stats.
func metricShape(t *testing.T, a *running) string {
	t.Helper()
	_, body := get(t, "http://"+a.Addrs()["metrics"]+"/metrics")
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		switch m := seriesRE.FindStringSubmatch(l); {
		case strings.HasPrefix(l, "# "):
			lines = append(lines, l)
		case m != nil:
			lines = append(lines, m[1])
		case l != "":
			t.Fatalf("/metrics line %q is neither a comment nor a sample", l)
		}
	}
	lines = append(lines, "# status report")
	var keys []string
	for k := range a.Stats() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(append(lines, keys...), "\n") + "\n"
}

// TestMetricNamesStable: the metric families on /metrics (names, help, types, label sets)
// and the counter names of the status report are read by the control plane, e2e and
// bootlab; they change only on purpose (go test -run TestMetricNamesStable -update).
func TestMetricNamesStable(t *testing.T) {
	for name, config := range map[string]func(t *testing.T, h *harness, dir string) *agent.Config{
		"ipv4": func(_ *testing.T, h *harness, dir string) *agent.Config { return h.config(dir) },
		"ipv6": func(_ *testing.T, h *harness, dir string) *agent.Config { return h.ipv6Config(dir) },
		// Boot over https: the plain refusals' family besides every other.
		"https": func(t *testing.T, h *harness, dir string) *agent.Config {
			c := h.config(dir)
			h.bootTLS(t, c, "127.0.0.1")
			return c
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			a, _ := h.start(t, config(t, h, t.TempDir()), h.plane.Link())
			got := metricShape(t, a)
			golden := filepath.Join("testdata", "metrics-"+name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), got); d != "" {
				t.Errorf("/metrics and status report names changed (-want +got):\n%s", d)
			}
		})
	}
}
