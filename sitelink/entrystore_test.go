package sitelink_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
)

var storeT0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func storeEntry(i int, notAfter time.Time) sitelink.ProxyDhcpEntry {
	return sitelink.ProxyDhcpEntry{
		MAC: hwid.MAC{0x52, 0x54, 0, 0, byte(i >> 8), byte(i)}, Arch: sitelink.ArchX86UEFI,
		Workflow: fmt.Sprintf("wf-%d", i%3), NotAfter: notAfter, TokenRef: fmt.Sprintf("tok-%d", i),
	}
}

func openStore(t *testing.T, path string, clk *clocktest.Fake) *sitelink.EntryStore {
	t.Helper()
	s, err := sitelink.OpenEntryStore(path, clk)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// macs returns the last byte of each entry's MAC, in order.
func macs(list []sitelink.ProxyDhcpEntry) []int {
	out := []int{}
	for _, e := range list {
		out = append(out, int(e.MAC[5]))
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEntryStoreRoundTrip: what a store acknowledged is what a reopened store holds,
// field for field, and removals by workflow and by MAC persist too.
func TestEntryStoreRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boot-entries.json")
	clk := clocktest.New(storeT0)
	s := openStore(t, path, clk)
	if _, ok := s.Damage(); ok {
		t.Error("a missing file reported as damaged")
	}
	yes := true
	var want []sitelink.ProxyDhcpEntry
	for i := range 6 {
		e := storeEntry(i, storeT0.Add(2*time.Hour))
		if i == 2 {
			e.UUID = "4c4c4544-0031-3510-8052-b4c04f4e4b32"
			e.SanbootSHA256 = strings.Repeat("ab", 32)
			e.Arch = sitelink.ArchBIOS
		}
		if i == 4 {
			e.SecureBoot = &yes
		}
		want = append(want, e)
		if err := s.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Writes(); n != 6 {
		t.Errorf("Writes = %d after six Puts, want 6", n)
	}
	s2 := openStore(t, path, clk)
	if d := cmp.Diff(want, s2.All()); d != "" {
		t.Fatalf("after reopen (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want[2:3], s2.Sanboot()); d != "" {
		t.Errorf("Sanboot (-want +got):\n%s", d)
	}
	p, ok := s2.LookupParsed(want[2].MAC)
	if !ok || p.MachineUUID() != hwid.MustParseUUID(want[2].UUID) || p.PXEArch() != hwid.ArchBIOS {
		t.Errorf("LookupParsed = %+v, %v; want the UUID and arch parsed", p, ok)
	}
	if err := s2.RemoveWorkflow("wf-0"); err != nil { // entries 0 and 3
		t.Fatal(err)
	}
	if err := s2.RemoveMACs(want[1].MAC); err != nil {
		t.Fatal(err)
	}
	if got := macs(openStore(t, path, clk).All()); fmt.Sprint(got) != "[2 4 5]" {
		t.Errorf("after removals and reopen: entries %v, want [2 4 5]", got)
	}
}

// TestEntryStoreUnparsable: a file that is not a list of entries is set aside with its
// bytes, the store opens empty and writes a sound file, and a second damaged file at the
// same instant does not overwrite the first one set aside.
func TestEntryStoreUnparsable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "boot-entries.json")
	clk := clocktest.New(storeT0)
	var asides []string
	for _, junk := range []string{"not json at all", `{"mac":"52:54:00:00:00:01"}`} {
		if err := os.WriteFile(path, []byte(junk), 0o600); err != nil {
			t.Fatal(err)
		}
		s := openStore(t, path, clk)
		d, ok := s.Damage()
		if !ok || d.Kept != 0 || d.Dropped != -1 || d.Reason == "" {
			t.Fatalf("%q: Damage = %+v, %v; want kept 0, dropped -1 and a reason", junk, d, ok)
		}
		if !strings.HasPrefix(d.SetAside, "boot-entries.json"+sitelink.EntrySetAsideInfix+"20261129T120000.000000000Z") {
			t.Errorf("set aside as %q", d.SetAside)
		}
		if got := readFile(t, filepath.Join(dir, d.SetAside)); string(got) != junk {
			t.Errorf("set-aside file holds %q, want the damaged bytes %q", got, junk)
		}
		if n := len(s.All()); n != 0 {
			t.Errorf("%d entries from a file that does not parse", n)
		}
		asides = append(asides, d.SetAside)
		s2 := openStore(t, path, clk)
		if d, ok := s2.Damage(); ok {
			t.Errorf("the file written anew is damaged too: %+v", d)
		}
	}
	if asides[0] == asides[1] {
		t.Errorf("two damaged files set aside under one name %q", asides[0])
	}
	if got := readFile(t, filepath.Join(dir, asides[0])); string(got) != "not json at all" {
		t.Errorf("the first set-aside file was overwritten: %q", got)
	}
}

// TestEntryStoreOneBadEntry: a file with one entry that does not validate keeps the others,
// sets the file aside and writes the good entries anew.
func TestEntryStoreOneBadEntry(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "boot-entries.json")
	clk := clocktest.New(storeT0)
	good1, good2 := storeEntry(1, storeT0.Add(time.Hour)), storeEntry(2, storeT0.Add(time.Hour))
	bad := storeEntry(3, storeT0.Add(time.Hour))
	bad.Arch = "PDP11"
	b, _ := json.Marshal([]sitelink.ProxyDhcpEntry{good1, bad, good2})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, path, clk)
	d, ok := s.Damage()
	if !ok || d.Kept != 2 || d.Dropped != 1 || !strings.HasPrefix(d.Reason, "entry 1: ") || !strings.Contains(d.Reason, "PDP11") {
		t.Fatalf("Damage = %+v, %v; want kept 2, dropped 1, entry 1 named", d, ok)
	}
	if got := readFile(t, filepath.Join(dir, d.SetAside)); !bytes.Equal(got, b) {
		t.Errorf("set-aside file holds %q, want the original bytes", got)
	}
	if got := macs(s.All()); fmt.Sprint(got) != "[1 2]" {
		t.Errorf("entries %v, want [1 2]", got)
	}
	if s.Writes() != 1 {
		t.Errorf("Writes = %d, want 1 (the good entries written anew)", s.Writes())
	}
	s2 := openStore(t, path, clk)
	if d, ok := s2.Damage(); ok {
		t.Errorf("after the rewrite: damaged again %+v", d)
	}
	if d := cmp.Diff([]sitelink.ProxyDhcpEntry{good1, good2}, s2.All()); d != "" {
		t.Errorf("after reopen (-want +got):\n%s", d)
	}
}

// TestEntryStoreLapse: an entry lapses at its NotAfter on the store's clock; Prune drops it
// from the file, and opening drops lapsed entries too.
func TestEntryStoreLapse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boot-entries.json")
	clk := clocktest.New(storeT0)
	s := openStore(t, path, clk)
	e1, e2 := storeEntry(1, storeT0.Add(time.Minute)), storeEntry(2, storeT0.Add(time.Hour))
	if err := s.Put(e1, e2); err != nil {
		t.Fatal(err)
	}
	if err := s.Prune(); err != nil || s.Writes() != 1 {
		t.Fatalf("Prune with nothing lapsed: %v, %d writes; want no write", err, s.Writes())
	}
	clk.Advance(time.Minute - time.Nanosecond)
	if _, ok := s.Lookup(e1.MAC); !ok {
		t.Error("entry 1 lapsed before its not-after")
	}
	clk.Advance(time.Nanosecond)
	if _, ok := s.Lookup(e1.MAC); ok {
		t.Error("entry 1 answered at its not-after")
	}
	if _, ok := s.LookupParsed(e1.MAC); ok {
		t.Error("entry 1 answered, parsed, at its not-after")
	}
	if got := macs(s.All()); fmt.Sprint(got) != "[2]" {
		t.Errorf("All = %v, want [2]", got)
	}
	if !strings.Contains(string(readFile(t, path)), e1.MAC.String()) {
		t.Fatal("entry 1 gone from disk before Prune")
	}
	if err := s.Prune(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(readFile(t, path)), e1.MAC.String()) {
		t.Error("lapsed entry still on disk after Prune")
	}
	clk.Advance(2 * time.Hour)
	s2 := openStore(t, path, clk)
	if n := len(s2.All()); n != 0 {
		t.Errorf("%d entries after all lapsed", n)
	}
	if s2.Writes() != 1 || strings.Contains(string(readFile(t, path)), e2.MAC.String()) {
		t.Errorf("open with every entry lapsed: %d writes, file %q; want them pruned from disk", s2.Writes(), readFile(t, path))
	}
}

// TestEntryStorePutInvalid: one invalid entry refuses the whole Put with an *EntryError
// naming it; nothing is written or served.
func TestEntryStorePutInvalid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boot-entries.json")
	clk := clocktest.New(storeT0)
	s := openStore(t, path, clk)
	if err := s.Put(storeEntry(1, storeT0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, path)
	good, bad := storeEntry(8, storeT0.Add(time.Hour)), storeEntry(9, storeT0.Add(time.Hour))
	bad.Workflow = "wf 9"
	err := s.Put(good, bad)
	var ee *sitelink.EntryError
	if !errors.As(err, &ee) || ee.Index != 1 || !errors.Is(err, sitelink.ErrBadEntry) {
		t.Fatalf("Put with a bad second entry = %v, want an *EntryError for index 1 wrapping ErrBadEntry", err)
	}
	if _, ok := s.Lookup(good.MAC); ok {
		t.Error("the good half of a refused Put is served")
	}
	if s.Writes() != 1 || !bytes.Equal(readFile(t, path), before) {
		t.Errorf("a refused Put wrote the file (%d writes)", s.Writes())
	}
}

// TestEntryStoreCrashMidWrite: a write a crash interrupted leaves its temporary file; the
// next open reads the last complete write and removes the leftover. A write that fails
// leaves what the store answers as it was.
func TestEntryStoreCrashMidWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "boot-entries.json")
	clk := clocktest.New(storeT0)
	s := openStore(t, path, clk)
	e1 := storeEntry(1, storeT0.Add(time.Hour))
	if err := s.Put(e1); err != nil {
		t.Fatal(err)
	}
	// What a crash halfway through the next write leaves beside the file.
	next, _ := json.MarshalIndent([]sitelink.ProxyDhcpEntry{e1, storeEntry(2, storeT0.Add(time.Hour))}, "", "  ")
	tmp := filepath.Join(dir, ".tmp-boot-entries.json-123456789")
	if err := os.WriteFile(tmp, next[:len(next)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, path, clk)
	if d, ok := s2.Damage(); ok {
		t.Errorf("damage after an interrupted write: %+v", d)
	}
	if d := cmp.Diff([]sitelink.ProxyDhcpEntry{e1}, s2.All()); d != "" {
		t.Errorf("after the crash (-want +got):\n%s", d)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the interrupted write's temporary file is still there: %v", err)
	}

	// A write that cannot replace the file (a directory took its name).
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	e3 := storeEntry(3, storeT0.Add(time.Hour))
	if err := s2.Put(e3); err == nil {
		t.Fatal("Put succeeded with a directory in the file's place")
	}
	if _, ok := s2.Lookup(e3.MAC); ok {
		t.Error("an entry whose write failed is served")
	}
	if err := s2.RemoveMACs(e1.MAC); err == nil {
		t.Fatal("RemoveMACs succeeded with a directory in the file's place")
	}
	if _, ok := s2.Lookup(e1.MAC); !ok {
		t.Error("an entry whose removal failed to persist is no longer served")
	}
}

// TestEntryStoreApply: a batch of commands costs one write and reports what the clean-ups
// dropped; a batch with an invalid entry or a kind that is not a boot entry command
// changes nothing.
func TestEntryStoreApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boot-entries.json")
	clk := clocktest.New(storeT0)
	s := openStore(t, path, clk)
	var cmds []sitelink.Command
	for i := range 9 {
		cmds = append(cmds, sitelink.Command{ID: fmt.Sprint("p", i), Kind: sitelink.KindPrepareRamdisk,
			Entries: []sitelink.ProxyDhcpEntry{storeEntry(i, storeT0.Add(time.Hour))}})
	}
	cmds = append(cmds,
		sitelink.Command{ID: "c1", Kind: sitelink.KindCleanUp, Workflow: "wf-1"},                             // 1, 4, 7
		sitelink.Command{ID: "c2", Kind: sitelink.KindCleanUp, MACs: []hwid.MAC{storeEntry(0, storeT0).MAC}}) // 0
	dropped, err := s.Apply(cmds...)
	if err != nil {
		t.Fatal(err)
	}
	if s.Writes() != 1 {
		t.Errorf("%d commands took %d writes, want 1", len(cmds), s.Writes())
	}
	got := macs(dropped)
	if len(got) != 4 {
		t.Errorf("dropped %v, want entries 0, 1, 4 and 7", got)
	}
	if got := macs(openStore(t, path, clk).All()); fmt.Sprint(got) != "[2 3 5 6 8]" {
		t.Errorf("after Apply and reopen: %v, want [2 3 5 6 8]", got)
	}
	before := readFile(t, path)
	bad := storeEntry(20, storeT0.Add(time.Hour))
	bad.Arch = ""
	for _, batch := range [][]sitelink.Command{
		{{ID: "x", Kind: sitelink.KindCleanUp, Workflow: "wf-2"}, {ID: "y", Kind: sitelink.KindPrepareRamdisk, Entries: []sitelink.ProxyDhcpEntry{bad}}},
		{{ID: "x", Kind: sitelink.KindCleanUp, Workflow: "wf-2"}, {ID: "z", Kind: sitelink.KindBMCPower}},
	} {
		_, err := s.Apply(batch...)
		if !errors.Is(err, sitelink.ErrBadEntry) && !errors.Is(err, sitelink.ErrBadCommand) {
			t.Errorf("Apply(%+v) = %v, want ErrBadEntry or ErrBadCommand", batch, err)
		}
		// CheckEntryCommand finds the command Apply refused the batch for, and only it.
		if err := sitelink.CheckEntryCommand(batch[0]); err != nil {
			t.Errorf("CheckEntryCommand(%s) = %v, want nil", batch[0].ID, err)
		}
		if err := sitelink.CheckEntryCommand(batch[1]); !errors.Is(err, sitelink.ErrBadEntry) && !errors.Is(err, sitelink.ErrBadCommand) {
			t.Errorf("CheckEntryCommand(%s) = %v, want ErrBadEntry or ErrBadCommand", batch[1].ID, err)
		}
	}
	if s.Writes() != 1 || !bytes.Equal(readFile(t, path), before) || len(s.All()) != 5 {
		t.Errorf("refused batches changed the store: %d writes, %d entries", s.Writes(), len(s.All()))
	}
	if _, err := s.Apply(); err != nil || s.Writes() != 1 {
		t.Errorf("Apply of nothing: %v, %d writes; want no write", err, s.Writes())
	}
}

// FuzzOpenEntryStore: whatever bytes the file holds, opening it never fails; it serves valid
// live entries only; damage sets the bytes aside unchanged; and the file it leaves opens
// again, undamaged, to the same entries.
func FuzzOpenEntryStore(f *testing.F) {
	good, _ := json.Marshal([]sitelink.ProxyDhcpEntry{storeEntry(1, storeT0.Add(time.Hour)), storeEntry(2, storeT0.Add(-time.Hour))})
	f.Add(good)
	f.Add([]byte(`[{"mac":"52:54:00:00:00:01","arch":"BIOS","workflow":"w","not_after":"2027-01-01T00:00:00Z"},{"mac":"x"}]`))
	f.Add([]byte(`[{"mac":"52:54:00:00:00:01","arch":"BIOS","workflow":"w","not_after":"2027-01-01T00:00:00Z","product_uuid":"4C4C4544-0031-3510-8052-B4C04F4E4B32"}]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{}`))
	f.Add([]byte{0xff, 0xfe, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "boot-entries.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		clk := clocktest.New(storeT0)
		s, err := sitelink.OpenEntryStore(path, clk)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		all := s.All()
		for _, e := range all {
			if err := e.Validate(); err != nil {
				t.Fatalf("served an invalid entry: %v", err)
			}
			if !storeT0.Before(e.NotAfter) {
				t.Fatalf("served a lapsed entry: %+v", e)
			}
			p, ok := s.LookupParsed(e.MAC)
			if !ok || p.PXEArch() != mustArch(t, e.Arch) {
				t.Fatalf("LookupParsed(%s) = %+v, %v", e.MAC, p, ok)
			}
		}
		if d, ok := s.Damage(); ok {
			if got := readFile(t, filepath.Join(dir, d.SetAside)); !bytes.Equal(got, b) {
				t.Fatalf("set-aside file holds %q, want %q", got, b)
			}
			if d.Kept < 0 || (d.Dropped == 0) || d.Reason == "" {
				t.Fatalf("Damage = %+v", d)
			}
		}
		s2, err := sitelink.OpenEntryStore(path, clk)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if d, ok := s2.Damage(); ok {
			t.Fatalf("the file the first open left is damaged: %+v", d)
		}
		if d := cmp.Diff(all, s2.All()); d != "" {
			t.Fatalf("reopen (-first +second):\n%s", d)
		}
	})
}

func mustArch(t *testing.T, name string) hwid.Arch {
	t.Helper()
	a, ok := sitelink.EntryArch(name)
	if !ok {
		t.Fatalf("EntryArch(%q) not known", name)
	}
	return a
}
