package bmc_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
)

// countingBMC is an Opener of an in-process BMC with power and inspection that counts
// what reaches it.
type countingBMC struct {
	mu     sync.Mutex
	opened int
	sets   []bmc.PowerAction
}

type countingDriver struct{ b *countingBMC }

func (c *countingBMC) Open(context.Context, bmc.Target) (bmc.Driver, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opened++
	return countingDriver{c}, nil
}

func (c *countingBMC) counts() (opened, sets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, len(c.sets)
}

func (countingDriver) Name() string { return "counting" }
func (countingDriver) Close() error { return nil }
func (countingDriver) PowerState(context.Context) (bmc.PowerState, error) {
	return bmc.PowerOn, nil
}
func (d countingDriver) SetPower(_ context.Context, a bmc.PowerAction) error {
	d.b.mu.Lock()
	defer d.b.mu.Unlock()
	d.b.sets = append(d.b.sets, a)
	return nil
}
func (countingDriver) Inspect(context.Context) (bmc.Inventory, error) {
	return bmc.Inventory{Manufacturer: "Counting"}, nil
}

var counted = bmc.TargetRef{Driver: "counting", Address: "bmc-1"}

// writeJournal makes a journal in dir holding "done" (done) and "sent" (running when the
// process stopped) and returns its file's bytes and id.
func writeJournal(t testing.TB, dir string) ([]byte, string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	j, err := bmc.OpenFileJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := j.Claim(ctx, "done", "power", now)
	if err != nil {
		t.Fatal(err)
	}
	rec.State, rec.Ended = bmc.StateDone, now
	if err := j.Finish(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.Claim(ctx, "sent", "power", now); err != nil {
		t.Fatal(err)
	}
	id := j.ID()
	j.Close()
	b, err := os.ReadFile(filepath.Join(dir, bmc.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	return b, id
}

// setAside returns the set-aside files in dir.
func setAside(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, bmc.JournalSetAsidePrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFileJournalSetsADamagedFileAside: a damaged journal file no longer stops the
// start. It is renamed beside the journal with its bytes intact, the marker says why,
// the journal starts under a new id with what could be kept, and the damage survives a
// restart. Per case:
//
//   - a broken frame (truncated, garbage, empty, another version, an unknown top-level
//     field, a bad journal id) keeps nothing: records read out of it would be guesses;
//   - inside a sound frame, records that parse are kept (a repeat of "done" is still
//     answered from the journal once the damage is cleared), a record that does not parse
//     but names its id is kept as "unknown" (never sent again), and one without a
//     readable id is lost.
func TestFileJournalSetsADamagedFileAside(t *testing.T) {
	good, _ := writeJournal(t, t.TempDir())
	cases := []struct {
		name string
		body func() []byte
		// want: the records kept, id -> state
		want                 map[string]bmc.RecordState
		kept, unparsed, lost int
	}{
		{"truncated", func() []byte { return good[:len(good)/2] }, nil, 0, 0, -1},
		{"garbage", func() []byte { return []byte("\x00\x01 not json") }, nil, 0, 0, -1},
		{"empty", func() []byte { return nil }, nil, 0, 0, -1},
		{"version", func() []byte { return bytes.Replace(good, []byte(`"v":1`), []byte(`"v":2`), 1) }, nil, 0, 0, -1},
		{"unknown field", func() []byte { return bytes.Replace(good, []byte(`{"v":1`), []byte(`{"x":1,"v":1`), 1) }, nil, 0, 0, -1},
		{"bad journal id", func() []byte {
			return []byte(`{"v":1,"id":"zz","records":[{"id":"done","op":"power","state":"done","started":"2026-01-01T00:00:00Z"}]}`)
		}, nil, 0, 0, -1},
		{"one record with a bad state", func() []byte {
			return bytes.Replace(good, []byte(`"id":"done","op":"power","state":"done"`), []byte(`"id":"done","op":"power","state":"maybe"`), 1)
		}, map[string]bmc.RecordState{"done": bmc.StateUnknown, "sent": bmc.StateUnknown}, 2, 1, 0},
		{"one record without an id", func() []byte {
			return bytes.Replace(good, []byte(`"records":[`), []byte(`"records":[{"state":"done"},`), 1)
		}, map[string]bmc.RecordState{"done": bmc.StateDone, "sent": bmc.StateUnknown}, 2, 0, 1},
		{"one record not an object", func() []byte {
			return bytes.Replace(good, []byte(`"records":[`), []byte(`"records":[42,`), 1)
		}, map[string]bmc.RecordState{"done": bmc.StateDone, "sent": bmc.StateUnknown}, 2, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			_, oldID := writeJournal(t, dir)
			body := c.body()
			if err := os.WriteFile(filepath.Join(dir, bmc.JournalFile), body, 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := bmc.OpenFileJournal(dir)
			if err != nil {
				t.Fatalf("OpenFileJournal on a damaged file: %v", err)
			}
			d, damaged := j.Damage()
			if !damaged || d.Reason == "" || d.Kept != c.kept || d.Unparsed != c.unparsed || d.Lost != c.lost {
				t.Errorf("Damage() = %+v, %v; want damaged, kept %d, unparsed %d, lost %d", d, damaged, c.kept, c.unparsed, c.lost)
			}
			files := setAside(t, dir)
			if len(files) != 1 || filepath.Base(files[0]) != d.SetAside {
				t.Fatalf("set-aside files %v, damage names %q", files, d.SetAside)
			}
			if b, _ := os.ReadFile(files[0]); !bytes.Equal(b, body) {
				t.Errorf("the set-aside file holds %q, want the damaged bytes %q", b, body)
			}
			if _, err := os.Stat(filepath.Join(dir, bmc.JournalDamagedMarker)); err != nil {
				t.Errorf("marker: %v", err)
			}
			if j.ID() == oldID {
				t.Error("the journal kept its id after losing records: a control plane would grant its lost claims again")
			}
			got := map[string]bmc.RecordState{}
			for _, r := range j.Records() {
				got[r.ID] = r.State
			}
			if c.want == nil {
				c.want = map[string]bmc.RecordState{}
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("records kept (-want +got):\n%s", diff)
			}
			// A restart finds the journal still damaged, and sets nothing more aside.
			j.Close()
			j, err = bmc.OpenFileJournal(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if d2, ok := j.Damage(); !ok || d2.SetAside != d.SetAside {
				t.Errorf("after a restart: Damage() = %+v, %v; want the same damage", d2, ok)
			}
			if n := len(setAside(t, dir)); n != 1 {
				t.Errorf("%d files set aside after a restart", n)
			}
		})
	}
}

// TestDamagedJournalRefusesDestructiveOperations: while the journal is damaged, Runner
// and the Executor send no destructive operation (typed ErrJournalDamaged, status
// not-sent, the BMC never opened), the Executor's queries keep working; once an operator
// clears the damage (ClearDamage, or removing the marker file, noticed without a
// restart), destructive operations run again, and repeats of the records kept are still
// answered from the journal.
func TestDamagedJournalRefusesDestructiveOperations(t *testing.T) {
	for _, clear := range []string{"method", "marker file"} {
		t.Run(clear, func(t *testing.T) {
			dir := t.TempDir()
			good, _ := writeJournal(t, dir)
			bad := bytes.Replace(good, []byte(`"records":[`), []byte(`"records":[{"id":"lost-one","state":"??"},`), 1)
			if err := os.WriteFile(filepath.Join(dir, bmc.JournalFile), bad, 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := bmc.OpenFileJournal(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			ctx := context.Background()
			b := &countingBMC{}
			e := &bmc.Executor{Opener: b, Journal: j}

			r := e.RunOp(ctx, "cmd-1", counted, bmc.SetPower{Action: bmc.PowerActionCycle})
			if r.Outcome.Status != bmc.StatusNotSent || r.Outcome.Kind != "journal-damaged" {
				t.Errorf("power on a damaged journal: %+v, want not-sent/journal-damaged", r.Outcome)
			}
			if err := r.Outcome.Err(); !errors.Is(err, bmc.ErrJournalDamaged) {
				t.Errorf("outcome error %v does not match ErrJournalDamaged", err)
			}
			ran := false
			err = (&bmc.Runner{Journal: j}).Run(ctx, "cmd-2", "power", func(context.Context) error { ran = true; return nil })
			var dmg *bmc.JournalDamage
			if ran || !errors.Is(err, bmc.ErrJournalDamaged) || !errors.As(err, &dmg) || dmg.SetAside == "" {
				t.Errorf("Runner on a damaged journal: ran %v, err %v", ran, err)
			}
			q := e.RunOp(ctx, "", counted, bmc.Query{})
			if inv, _ := q.Value.(bmc.QueryResult); q.Outcome.Status != bmc.StatusOK || inv.Inventory.Manufacturer != "Counting" {
				t.Errorf("query on a damaged journal: %+v %+v", q.Outcome, q.Value)
			}
			if opened, sets := b.counts(); opened != 1 || sets != 0 {
				t.Fatalf("BMC opened %d times, %d power changes; want only the query", opened, sets)
			}

			switch clear {
			case "method":
				if err := j.ClearDamage(); err != nil {
					t.Fatal(err)
				}
			case "marker file":
				if err := os.Remove(filepath.Join(dir, bmc.JournalDamagedMarker)); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok := j.Damage(); ok {
				t.Fatal("still damaged after the operator cleared it")
			}
			if len(setAside(t, dir)) != 1 {
				t.Error("clearing removed the set-aside file")
			}
			want := map[string]string{
				"cmd-1":    "ok replayed=false",       // refused before: runs now
				"done":     "ok replayed=true",        // kept from the damaged file
				"sent":     "unknown replayed=true",   // may have been sent
				"lost-one": "unknown replayed=true",   // damaged record, id kept
				"cmd-3":    "ok replayed=false",       // new
				"":         "not-sent replayed=false", // a destructive op needs an id
			}
			got := map[string]string{}
			for id := range want {
				r := e.RunOp(ctx, id, counted, bmc.SetPower{Action: bmc.PowerActionCycle})
				got[id] = string(r.Outcome.Status) + " replayed=" + map[bool]string{true: "true", false: "false"}[r.Replayed]
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("after clearing (-want +got):\n%s", diff)
			}
			if _, sets := b.counts(); sets != 2 {
				t.Errorf("%d power changes after clearing, want 2 (cmd-1, cmd-3)", sets)
			}
		})
	}
}

// TestDamageTwiceKeepsBothFiles: a journal damaged again after being cleared sets the new
// file aside beside the first; nothing is ever deleted.
func TestDamageTwiceKeepsBothFiles(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 {
		if err := os.WriteFile(filepath.Join(dir, bmc.JournalFile), []byte("garbage "+strings.Repeat("x", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := bmc.OpenFileJournal(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.ClearDamage(); err != nil {
			t.Fatal(err)
		}
		j.Close()
	}
	if files := setAside(t, dir); len(files) != 2 {
		t.Errorf("set-aside files %v, want 2", files)
	}
}

// TestOneReplayPath: after a simulated crash (a journal left with operations running,
// waiting for their claim, done, done differently and failed, then reopened), Runner and
// the Executor answer every id alike: the same status, kind and message, the same ids
// sent again (only those that never reached the BMC or failed without effect), and a
// second repeat sends nothing.
func TestOneReplayPath(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	dirs := [2]string{t.TempDir(), t.TempDir()}
	for _, dir := range dirs {
		j, err := bmc.OpenFileJournal(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []bmc.Record{
			{ID: "done", State: bmc.StateDone},
			{ID: "differs", State: bmc.StateDone, Kind: bmc.ErrDiffers, Message: "kept Continuous"},
			{ID: "timeout", State: bmc.StateFailed, Kind: bmc.ErrTimeout, Message: "no answer"},
			{ID: "refused", State: bmc.StateFailed, Kind: bmc.ErrRefused, Message: "busy", Retryable: true},
			{ID: "sending", State: bmc.StateRunning},
			{ID: "waiting", State: bmc.StateRunning, Claiming: true},
		} {
			rec, ok, err := j.Claim(ctx, r.ID, "power", now)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			r.Op, r.Started = rec.Op, rec.Started
			if err := j.Finish(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		j.Close() // the process dies with "sending" and "waiting" running
	}
	open := func(dir string) *bmc.FileJournal {
		j, err := bmc.OpenFileJournal(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		return j
	}
	b := &countingBMC{}
	e := &bmc.Executor{Opener: b, Journal: open(dirs[0])}
	runner := &bmc.Runner{Journal: open(dirs[1])}
	ids := []string{"done", "differs", "timeout", "refused", "sending", "waiting"}
	type answer struct {
		Status   bmc.Status
		Kind     string
		Message  string
		Replayed bool
		Sent     bool
	}
	want := map[string]answer{
		"done":    {Status: bmc.StatusOK, Replayed: true},
		"differs": {Status: bmc.StatusDiffers, Kind: "differs", Message: "kept Continuous", Replayed: true},
		"timeout": {Status: bmc.StatusFailed, Kind: "timeout", Message: "no answer", Replayed: true},
		"refused": {Status: bmc.StatusOK, Sent: true},
		"sending": {Status: bmc.StatusUnknown, Kind: "outcome-unknown", Message: "running when the process stopped; it may have reached the BMC", Replayed: true},
		"waiting": {Status: bmc.StatusOK, Sent: true},
	}
	for round := range 2 {
		gotE, gotR := map[string]answer{}, map[string]answer{}
		for _, id := range ids {
			_, before := b.counts()
			r := e.RunOp(ctx, id, counted, bmc.SetPower{Action: bmc.PowerActionCycle})
			_, after := b.counts()
			gotE[id] = answer{r.Outcome.Status, r.Outcome.Kind, r.Outcome.Message, r.Replayed, after > before}

			sent := false
			replayed, err := runner.RunReport(ctx, id, "power", func(context.Context) error { sent = true; return nil })
			o := bmc.OutcomeOf(err)
			msg := ""
			var oe *bmc.OpError
			if errors.As(err, &oe) {
				msg = oe.Message
			}
			gotR[id] = answer{o.Status, o.Kind, msg, replayed, sent}
		}
		if round == 1 { // everything is recorded now: nothing is sent again
			for id, a := range want {
				if a.Sent {
					want[id] = answer{Status: a.Status, Replayed: true}
				}
			}
		}
		if diff := cmp.Diff(want, gotE); diff != "" {
			t.Errorf("round %d: Executor (-want +got):\n%s", round, diff)
		}
		if diff := cmp.Diff(gotE, gotR); diff != "" {
			t.Errorf("round %d: Runner differs from the Executor (-executor +runner):\n%s", round, diff)
		}
	}
}

// FuzzOpenFileJournal: whatever the journal file holds, OpenFileJournal starts. A file it
// takes as sound reopens to the same id and records (a round trip through its own
// writing); a damaged one is set aside byte for byte, and the journal refuses claims with
// ErrJournalDamaged, also after a restart.
func FuzzOpenFileJournal(f *testing.F) {
	dir := f.TempDir()
	good, _ := writeJournal(f, dir)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(bytes.Replace(good, []byte(`"state":"done"`), []byte(`"state":"maybe"`), 1))
	f.Add(bytes.Replace(good, []byte(`"records":[`), []byte(`"records":[{"id":7},`), 1))
	f.Add([]byte(`{"v":1,"id":"0123456789abcdef0123456789abcdef","records":[]}`))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, bmc.JournalFile), body, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := bmc.OpenFileJournal(dir)
		if err != nil {
			t.Fatalf("OpenFileJournal: %v", err)
		}
		id, recs := j.ID(), j.Records()
		d, damaged := j.Damage()
		if damaged {
			if b, err := os.ReadFile(filepath.Join(dir, d.SetAside)); err != nil || !bytes.Equal(b, body) {
				t.Fatalf("set-aside file %q: %v; bytes kept: %v", d.SetAside, err, bytes.Equal(b, body))
			}
			if _, _, err := j.Claim(context.Background(), "new-op", "power", time.Now()); !errors.Is(err, bmc.ErrJournalDamaged) {
				t.Fatalf("claim on a damaged journal: %v", err)
			}
		}
		j.Close()
		j2, err := bmc.OpenFileJournal(dir)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer j2.Close()
		if _, again := j2.Damage(); again != damaged {
			t.Fatalf("damaged %v, after a restart %v", damaged, again)
		}
		if j2.ID() != id {
			t.Fatalf("id %s, after a restart %s", id, j2.ID())
		}
		if diff := cmp.Diff(recs, j2.Records(), cmp.Comparer(func(a, b error) bool { return bmc.KindName(a) == bmc.KindName(b) }),
			cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Fatalf("records after a restart (-before +after):\n%s", diff)
		}
	})
}
