package agent_test

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
)

func entry(i int, notAfter time.Time) sitelink.ProxyDhcpEntry {
	return sitelink.ProxyDhcpEntry{
		MAC: hwid.MAC{0x52, 0x54, 0, 0, byte(i >> 8), byte(i)}, Arch: sitelink.ArchX86UEFI,
		Workflow: fmt.Sprintf("wf-%d", i%3), NotAfter: notAfter, TokenRef: fmt.Sprintf("tok-%d", i),
	}
}

func TestEntriesPersistAndClean(t *testing.T) {
	path := filepath.Join(t.TempDir(), agent.EntriesFileName)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, err := agent.OpenEntries(path, clock)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := s.Put(entry(i, now.Add(2*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	// Another process (a restart) sees all six.
	s2, err := agent.OpenEntries(path, clock)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s2.All()); got != 6 {
		t.Fatalf("after reopen: %d entries, want 6", got)
	}
	// Clean-up by workflow removes wf-0 (entries 0 and 3), by MAC entry 1.
	if err := s2.RemoveWorkflow("wf-0"); err != nil {
		t.Fatal(err)
	}
	if err := s2.RemoveMACs(entry(1, now).MAC); err != nil {
		t.Fatal(err)
	}
	s3, _ := agent.OpenEntries(path, clock)
	var got []int
	for _, e := range s3.All() {
		got = append(got, int(e.MAC[5]))
	}
	if fmt.Sprint(got) != "[2 4 5]" {
		t.Errorf("after clean-up: entries %v, want [2 4 5]", got)
	}
	// An invalid entry is refused whole; nothing changes.
	bad := entry(9, now.Add(time.Hour))
	bad.Arch = "PDP11"
	if err := s3.Put(entry(8, now.Add(time.Hour)), bad); !errors.Is(err, sitelink.ErrBadEntry) {
		t.Errorf("Put with a bad entry = %v, want ErrBadEntry", err)
	}
	if _, ok := s3.Lookup(entry(8, now).MAC); ok {
		t.Error("the good half of a refused Put was stored")
	}
}

func TestEntriesLapse(t *testing.T) {
	path := filepath.Join(t.TempDir(), agent.EntriesFileName)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s, _ := agent.OpenEntries(path, func() time.Time { return now })
	s.Put(entry(1, now.Add(time.Minute)), entry(2, now.Add(time.Hour)))
	now = now.Add(time.Minute) // entry 1's not-after: lapsed from this instant on
	if _, ok := s.Lookup(entry(1, now).MAC); ok {
		t.Error("entry 1 answered at its not-after")
	}
	if _, ok := s.Lookup(entry(2, now).MAC); !ok {
		t.Error("entry 2 lost")
	}
	if err := s.Prune(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), entry(1, now).MAC.String()) {
		t.Errorf("lapsed entry still on disk after Prune:\n%s", b)
	}
	// A restart drops lapsed entries too.
	now = now.Add(2 * time.Hour)
	s2, _ := agent.OpenEntries(path, func() time.Time { return now })
	if n := len(s2.All()); n != 0 {
		t.Errorf("%d entries after all lapsed", n)
	}
}

// TestEntriesSurviveSIGKILL kills a process that is writing entries at random moments: every
// entry it acknowledged (printed after Put returned) is there after the kill, and the file
// always parses.
func TestEntriesSurviveSIGKILL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, agent.EntriesFileName)
	r := rand.New(rand.NewPCG(7, 11))
	acked := map[string]bool{}
	for round := range 12 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "SITEAGENT_ENTRY_WRITER="+path, "SITEAGENT_ENTRY_ROUND="+strconv.Itoa(round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a random number of acknowledgements.
		want := 1 + r.IntN(20)
		sc := bufio.NewScanner(out)
		for n := 0; n < want && sc.Scan(); {
			if mac, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
				acked[mac] = true
				n++
			}
		}
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		s, err := agent.OpenEntries(path, nil)
		if err != nil {
			t.Fatalf("round %d: entries file unreadable after SIGKILL: %v", round, err)
		}
		for mac := range acked {
			m, _ := hwid.ParseMAC(mac)
			if _, ok := s.Lookup(m); !ok {
				t.Fatalf("round %d: acknowledged entry %s lost after SIGKILL", round, mac)
			}
		}
	}
	if len(acked) < 12 {
		t.Errorf("only %d entries acknowledged in all rounds", len(acked))
	}
}

// TestMain runs the entry writer that TestEntriesSurviveSIGKILL kills, when the test binary
// is started as that child; otherwise the tests, and then a check that no goroutine of any
// agent, server or timer outlived its test (the client's idle connections closed first).
func TestMain(m *testing.M) {
	if path := os.Getenv("SITEAGENT_ENTRY_WRITER"); path != "" {
		writeEntriesUntilKilled(path)
	}
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

func writeEntriesUntilKilled(path string) {
	round, _ := strconv.Atoi(os.Getenv("SITEAGENT_ENTRY_ROUND"))
	s, err := agent.OpenEntries(path, nil)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		e := entry(round*1000+i, time.Now().Add(2*time.Hour))
		if err := s.Put(e); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("ACK", e.MAC)
	}
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
