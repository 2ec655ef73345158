package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestBootlab runs the whole demo with six machines: it must end with everything that should
// happen having happened.
func TestBootlab(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var buf bytes.Buffer
	out := &printer{w: &buf}
	ok, err := run(ctx, slog.New(slog.DiscardHandler), out, 6)
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if !ok {
		t.Fatalf("the lab did not complete:\n%s", buf.String())
	}
	for _, want := range []string{
		"machines booted: 6 of 6 (agent-a 3, agent-b 3)",
		// Two DHCP answers per machine (firmware, then iPXE); kernel, initrd and deploy image
		// from the cache; agent-a signed one spare script; agent-b refused one while standing by.
		"agent-a counted: 6 proxy DHCP answers, 3 TFTP transfers, 4 scripts, 4 assertions signed, 9 cache answers, 0 fenced",
		"agent-b counted: 6 proxy DHCP answers, 3 TFTP transfers, 3 scripts, 3 assertions signed, 9 cache answers, 1 fenced",
		"refused (replay)", "All 6 machines booted",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, buf.String())
		}
	}
}
