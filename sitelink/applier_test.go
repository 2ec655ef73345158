package sitelink_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/google/go-cmp/cmp"
)

// TestEntryApplier: commands are applied off the caller, a bad one is refused and never
// acknowledged, a command queued or acknowledged is not applied twice, and an
// acknowledgement delivered lets the control plane's next copy be applied again.
func TestEntryApplier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := openStore(t, filepath.Join(t.TempDir(), "boot-entries.json"), clocktest.New(storeT0))
		var logs bytes.Buffer
		var dropped [][]sitelink.ProxyDhcpEntry
		p := &sitelink.EntryApplier{
			Store:     store,
			OnApplied: func(d []sitelink.ProxyDhcpEntry) { dropped = append(dropped, d) },
			Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()

		e0 := storeEntry(0, storeT0.Add(time.Hour))
		prep := sitelink.Command{ID: "p0", Kind: sitelink.KindPrepareRamdisk, Entries: []sitelink.ProxyDhcpEntry{e0}}
		bad := sitelink.Command{ID: "x", Kind: "bmc.nothing"}
		clean := sitelink.Command{ID: "c0", Kind: sitelink.KindCleanUp, Workflow: e0.Workflow}
		check := func(step string, acked []string, writes uint64, ndropped int) {
			t.Helper()
			synctest.Wait()
			if n := p.Queued(); n != 0 {
				t.Errorf("%s: Queued = %d, want 0", step, n)
			}
			if diff := cmp.Diff(acked, p.Acked()); diff != "" {
				t.Errorf("%s: Acked (-want +got):\n%s", step, diff)
			}
			if got := store.Writes(); got != writes {
				t.Errorf("%s: %d writes, want %d", step, got, writes)
			}
			if len(dropped) != ndropped {
				t.Errorf("%s: OnApplied called %d times, want %d", step, len(dropped), ndropped)
			}
		}

		p.Enqueue(prep, bad)
		check("prepare and a bad kind", []string{"p0"}, 1, 1)
		if _, ok := store.Lookup(e0.MAC); !ok {
			t.Error("the prepared entry is not in the store")
		}
		if !strings.Contains(logs.String(), `msg="command refused" id=x`) {
			t.Errorf("log does not name the refused command:\n%s", logs.String())
		}
		p.Enqueue(prep) // sent again before the acknowledgement got through
		check("prepare again, not delivered", []string{"p0"}, 1, 1)
		p.Enqueue(clean)
		check("clean up", []string{"p0", "c0"}, 2, 2)
		if len(dropped[1]) != 1 || dropped[1][0].MAC != e0.MAC {
			t.Errorf("clean-up dropped %v, want the entry of %v", dropped[1], e0.MAC)
		}
		p.Delivered([]string{"p0"})
		p.Enqueue(prep) // a new copy after delivery is applied
		check("prepare after delivery", []string{"c0", "p0"}, 3, 3)

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
}
