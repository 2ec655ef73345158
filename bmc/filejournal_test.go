package bmc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/clock/clocktest"
)

func TestFileJournalSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	j, err := bmc.OpenFileJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := j.ID()
	if _, err := bmc.OpenFileJournal(dir); !errors.Is(err, bmc.ErrJournalLocked) {
		t.Fatalf("second open of a journal in use: %v", err)
	}
	claim := func(j *bmc.FileJournal, opID string) bmc.Record {
		t.Helper()
		rec, ok, err := j.Claim(ctx, opID, "power", now)
		if err != nil || !ok {
			t.Fatalf("claim %s: %v %v", opID, ok, err)
		}
		return rec
	}
	done := claim(j, "done")
	done.State, done.Ended = bmc.StateDone, now
	failed := claim(j, "failed")
	failed.State, failed.Kind, failed.Message = bmc.StateFailed, bmc.ErrTimeout, "no answer"
	waiting := claim(j, "waiting")
	waiting.Claiming = true
	claim(j, "sending") // running, may have been sent
	for _, r := range []bmc.Record{done, failed, waiting} {
		if err := j.Finish(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j2, err := bmc.OpenFileJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if j2.ID() != id {
		t.Errorf("journal id changed across reopen: %s, %s", id, j2.ID())
	}
	got := map[string]string{}
	for _, r := range j2.Records() {
		got[r.ID] = fmt.Sprintf("%s kind=%v retryable=%v", r.State, bmc.KindName(r.Kind), r.Retryable)
	}
	want := map[string]string{
		"done":    "done kind= retryable=false",
		"failed":  "failed kind=timeout retryable=false",
		"waiting": "failed kind= retryable=true", // never sent: a repeat claims it again
		"sending": "unknown kind= retryable=false",
	}
	if !maps(got, want) {
		t.Errorf("records after reopen: %v, want %v", got, want)
	}
	r := &bmc.Runner{Journal: j2, Clock: clocktest.New(now)}
	for _, c := range []struct {
		id   string
		runs bool
		kind error
	}{{"done", false, nil}, {"failed", false, bmc.ErrTimeout}, {"sending", false, bmc.ErrOutcomeUnknown}, {"waiting", true, nil}} {
		ran := false
		err := r.Run(ctx, c.id, "power", func(context.Context) error { ran = true; return nil })
		if ran != c.runs || !errors.Is(err, c.kind) || (c.kind == nil && err != nil) {
			t.Errorf("%s after restart: ran %v, err %v; want ran %v, kind %v", c.id, ran, err, c.runs, c.kind)
		}
	}
}

func lines(p string) int {
	b, _ := os.ReadFile(p)
	return strings.Count(string(b), "\n")
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The SIGKILL test: a child process runs operations 0..N-1 through a Runner on a
// FileJournal; each operation appends its id to an effects file (the BMC) with one write.
// The child is killed with SIGKILL at random moments and started again, always asked for
// the same ids, as a control plane that resends would. No id ever reaches the effects
// file twice, and once a run completes every id was either sent once or is unknown.
const (
	killChildEnv = "BMC_JOURNAL_KILL_CHILD"
	killOps      = 200
)

func TestFileJournalSIGKILL(t *testing.T) {
	dir := t.TempDir()
	effects := filepath.Join(dir, "effects")
	kills := 0
	for round := 0; ; round++ {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Kill once the BMC has seen a few more operations (a different number each round).
		var err error
		if round < 12 {
			target := lines(effects) + 1 + (round*7)%13
		wait:
			for {
				select {
				case err = <-done:
					break wait
				case <-time.After(200 * time.Microsecond):
					if lines(effects) >= target {
						_ = cmd.Process.Signal(syscall.SIGKILL)
						err = <-done
						kills++
						break wait
					}
				}
			}
		} else {
			err = <-done
		}
		if err == nil {
			break
		}
		if round >= 12 {
			t.Fatalf("child failed: %v\n%s", err, out)
		}
	}
	b, err := os.ReadFile(effects)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		seen[l]++
		if seen[l] > 1 {
			t.Errorf("operation %s reached the BMC twice", l)
		}
	}
	j, err := bmc.OpenFileJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	unknown := 0
	for _, r := range j.Records() {
		switch {
		case r.State == bmc.StateUnknown:
			unknown++
			if seen[r.ID] > 1 {
				t.Errorf("%s unknown and sent twice", r.ID)
			}
		case r.State == bmc.StateDone && seen[r.ID] != 1:
			t.Errorf("%s done but sent %d times", r.ID, seen[r.ID])
		case r.State != bmc.StateDone:
			t.Errorf("%s ended %s", r.ID, r.State)
		}
	}
	if j.Len() != killOps {
		t.Errorf("journal holds %d records, want %d", j.Len(), killOps)
	}
	if kills == 0 {
		t.Error("the child was never killed")
	}
	t.Logf("%d kills; %d operations sent once, %d unknown (killed while one ran: maybe sent, never again), 0 doubles", kills, len(seen), unknown)
}

// TestMain runs the SIGKILL test's child when asked to.
func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		if err := killChild(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// killChild runs operations 0..killOps-1 on the journal in dir, each appending its id to
// the effects file.
func killChild(dir string) error {
	j, err := bmc.OpenFileJournal(dir)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "effects"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	r := &bmc.Runner{Journal: j}
	for i := range killOps {
		id := "op-" + strconv.Itoa(i)
		_ = r.Run(context.Background(), id, "power", func(context.Context) error {
			_, err := f.Write([]byte(id + "\n"))
			return err
		})
	}
	return nil
}
