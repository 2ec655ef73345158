package agent_test

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
)

func entry(i int, notAfter time.Time) sitelink.ProxyDhcpEntry {
	return sitelink.ProxyDhcpEntry{
		MAC: hwid.MAC{0x52, 0x54, 0, 0, byte(i >> 8), byte(i)}, Arch: sitelink.ArchX86UEFI,
		Workflow: fmt.Sprintf("wf-%d", i%3), NotAfter: notAfter, TokenRef: fmt.Sprintf("tok-%d", i),
	}
}

// TestMain runs the tests, and then checks that no goroutine of any agent, server or timer
// outlived its test (the client's idle connections closed first).
func TestMain(m *testing.M) {
	code := m.Run()
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestCommandsOneWrite: the 50 boot.prepareRamdisk commands of one heartbeat's answer, and a
// clean-up after them, are persisted in one write of the entries file, and all acknowledged.
func TestCommandsOneWrite(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	var es []sitelink.ProxyDhcpEntry
	for i := range 50 {
		e := entry(100+i, h.clk.Now().Add(2*time.Hour))
		es = append(es, e)
		h.plane.PrepareRamdisk("agent-t", []sitelink.ProxyDhcpEntry{e})
	}
	h.plane.CleanUp("agent-t", es[0].Workflow) // wf-1: a third of them
	before := a.Stats()["boot_entries_writes"]
	h.beat(t, a)
	if n := a.Stats()["boot_entries_writes"] - before; n != 1 {
		t.Errorf("the answer's 51 commands took %d writes of the entries file, want 1", n)
	}
	kept := 0
	for _, e := range es {
		if _, ok := a.Entries().Lookup(e.MAC); ok {
			kept++
			if e.Workflow == es[0].Workflow {
				t.Errorf("%s of the cleaned-up workflow is still held", e.MAC)
			}
		}
	}
	if kept != 50-17 {
		t.Errorf("%d entries held, want %d", kept, 50-17)
	}
	h.beat(t, a)
	if p := h.plane.Pending("agent-t"); len(p) != 0 {
		t.Errorf("%d commands still unacknowledged", len(p))
	}
}
