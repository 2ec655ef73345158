package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBootlab runs the whole demo with six machines: it must end with everything that should
// happen having happened. Then no secret the lab handed out (discovery tokens, cache grants,
// assertions, the node keys) is in the agents' or the control plane's logs (at debug level),
// in the agents' /metrics, or in the status reports the control plane keeps.
func TestBootlab(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var buf bytes.Buffer
	out := &printer{w: &buf}
	logs := &lockedBuffer{}
	l, ok, err := runLab(ctx, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), out, 6)
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if !ok {
		t.Fatalf("the lab did not complete:\n%s", buf.String())
	}
	for _, want := range []string{
		"machines booted: 6 of 6 (agent-a 3, agent-b 3)",
		// Two DHCP answers per machine (firmware, then iPXE); kernel, initrd and deploy image
		// from the cache; agent-a booted machine 1 once more for a spare script (its kernel and
		// initrd too); agent-b refused one while standing by, and answered the 4011 REQUEST whose
		// nonce the bystander presents.
		"agent-a counted: 8 proxy DHCP answers, 4 TFTP transfers, 4 scripts, 4 assertions signed, 11 cache answers, 0 fenced",
		"agent-b counted: 7 proxy DHCP answers, 3 TFTP transfers, 3 scripts, 3 assertions signed, 9 cache answers, 1 fenced",
		// The boot binding's refusals: the off-segment requester, the bystander.
		"ok    a requester whose answer would go to another network (198.51.100.77) is refused (off-segment)",
		"ok    a bystander presenting the machine's nonce first, from its own address, is refused (exit script, nonce-other-address)",
		"refused (replay)", "All 6 machines booted",
		// The site section while the deploy image warms, then once it is verified.
		// (the kernel and initrd may still be warming beside it on a loaded machine)
		"agent-a's site section: PROGRESSING (warming: ",
		"ok    agent-a's site section is PROGRESSING while the deploy image warms",
		"agent-a's site section: READY",
		"ok    agent-a's site section is READY once the deploy image is verified",
		"ok    a stranger's sync in agent-b's name is refused (403): answered 403: forbidden",
		"ok    an enrolled agent asking for a BMC credential no live command routed to it names is refused (403): answered 403: forbidden",
		"ok    an enrolled agent claiming a command not routed to it is refused (403): answered 403: forbidden",
		"ok    a plain-http control URL is refused by the config check (siteagent -check): agent: config: Control.URL: plain http",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, buf.String())
		}
	}

	l.mu.Lock()
	secrets, metrics := l.secrets, l.metrics
	l.mu.Unlock()
	// Per machine a token, an assertion and its grants; per agent its node key.
	if len(secrets) < 6*3+2 || len(metrics) != 2 {
		t.Fatalf("the lab noted %d secrets and %d agents' metrics; want at least %d and 2", len(secrets), len(metrics), 6*3+2)
	}
	var reports strings.Builder
	for _, a := range l.agents {
		fmt.Fprintf(&reports, "%+v %+v\n", l.plane.Images(a.name), l.plane.Discovered(a.name))
	}
	places := map[string]string{"logs": logs.String(), "status reports": reports.String()}
	for name, m := range metrics {
		places[name+" /metrics"] = m
	}
	if !strings.Contains(places["logs"], "level=DEBUG") {
		t.Fatal("no debug logs captured")
	}
	for where, text := range places {
		for _, s := range secrets {
			if strings.Contains(text, s) || strings.Contains(text, strings.TrimSpace(s)) {
				t.Errorf("a secret handed out is in the %s: %.8s...", where, s)
			}
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
