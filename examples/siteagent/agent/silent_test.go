package agent_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/iana"
)

// syncBuffer is a bytes.Buffer safe for the agent's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSilentAfterAnswer: a machine proxy DHCP answered that then asks the agent for nothing
// within the nonce window (its firmware took another server's boot file) is named in the
// log once, with the likely cause, and counted each time; a machine that fetched its script
// is not.
func TestSilentAfterAnswer(t *testing.T) {
	h := newHarness(t)
	var logs syncBuffer
	h.logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg := h.config(t.TempDir())
	cfg.Boot.NonceWindow = 10 * time.Second
	a, _ := h.start(t, cfg, h.plane.Link())
	quiet, booted := entry(1, h.clk.Now().Add(2*time.Hour)), entry(2, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, quiet, booted)

	silentLines := func() int { return strings.Count(logs.String(), "asked this agent for nothing") }
	for round := 1; round <= 2; round++ {
		if f := ipxeDHCP(a, quiet.MAC, iana.EFI_X86_64); f == "" {
			t.Fatal("proxy DHCP did not answer the quiet machine")
		}
		// The booted machine asks for its script after its answer.
		if st, _ := get(t, scriptURL(a, booted)); st == 0 {
			t.Fatal("no answer to the booted machine's script")
		}
		h.beat(t, a)
		if n := a.Stats()["boot_answered_silent"]; n != uint64(round-1) {
			t.Fatalf("round %d, inside the window: boot_answered_silent = %d, want %d", round, n, round-1)
		}
		h.clk.Advance(cfg.Boot.NonceWindow)
		h.beat(t, a)
		if n := a.Stats()["boot_answered_silent"]; n != uint64(round) {
			t.Errorf("round %d, after the window: boot_answered_silent = %d, want %d", round, n, round)
		}
	}
	if n := silentLines(); n != 1 {
		t.Errorf("%d log lines about silent machines, want 1 (once per MAC):\n%s", n, logs.String())
	}
	out := logs.String()
	if !strings.Contains(out, quiet.MAC.String()) || !strings.Contains(out, "What the site's DHCP server must not send") {
		t.Errorf("the log does not name the MAC and the likely cause:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "asked this agent for nothing") && strings.Contains(line, booted.MAC.String()) {
			t.Errorf("the machine that fetched its script is named: %s", line)
		}
	}
	_, body := get(t, "http://"+a.Addrs()["metrics"]+"/metrics")
	if !strings.Contains(body, "siteboot_boot_answered_silent_total 2") {
		t.Errorf("metrics: want siteboot_boot_answered_silent_total 2")
	}
}
