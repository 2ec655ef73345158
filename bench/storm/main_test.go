package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestScrapeTFTP: the agent's TFTP counters are read from Prometheus text as the agent
// writes it (help and type lines, labels, totals), other metrics left out.
func TestScrapeTFTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `# HELP siteboot_tftp_bytes_total File bytes sent over TFTP.
# TYPE siteboot_tftp_bytes_total counter
siteboot_tftp_bytes_total 1.049624576e+09
# HELP siteboot_tftp_dropped_total TFTP requests dropped unanswered, by limit.
# TYPE siteboot_tftp_dropped_total counter
siteboot_tftp_dropped_total{limit="busy"} 0
siteboot_tftp_dropped_total{limit="per-source"} 3
siteboot_tftp_transfers_total{outcome="ok"} 1001
siteboot_tftp_waiting 2
siteboot_dhcp_answers_total 2000
`)
	}))
	defer srv.Close()
	want := map[string]uint64{"tftp_bytes": 1049624576, "tftp_dropped_busy": 0, "tftp_dropped_per-source": 3,
		"tftp_transfers_ok": 1001, "tftp_waiting": 2}
	if diff := cmp.Diff(want, scrapeTFTP(srv.URL)); diff != "" {
		t.Errorf("scrapeTFTP (-want +got):\n%s", diff)
	}
	srv.Close()
	if got := scrapeTFTP(srv.URL); len(got) != 0 {
		t.Errorf("scrapeTFTP of a closed server: %v, want none", got)
	}
}
