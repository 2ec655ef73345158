package bmc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/clock/clocktest"
)

type fakeDriver struct{ name string }

func (f *fakeDriver) Name() string { return f.name }
func (f *fakeDriver) Close() error { return nil }

func TestRegistry(t *testing.T) {
	var reg bmc.Registry // the zero value is usable
	opened := 0
	op := bmc.OpenerFunc(func(_ context.Context, tg bmc.Target) (bmc.Driver, error) {
		opened++
		return &fakeDriver{name: tg.Driver}, nil
	})
	if err := reg.Register("redfish", op); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register("ipmi", op); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		o    bmc.Opener
	}{{"redfish", op}, {"", op}, {"x", nil}} {
		if err := reg.Register(bad.name, bad.o); err == nil {
			t.Errorf("Register(%q, %v) accepted", bad.name, bad.o)
		}
	}
	if diff := cmp.Diff([]string{"ipmi", "redfish"}, reg.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	d, err := reg.Open(context.Background(), bmc.Target{Driver: "ipmi", Address: "192.0.2.9"})
	if err != nil || d.Name() != "ipmi" || opened != 1 {
		t.Fatalf("Open = %v, %v (opened %d)", d, err, opened)
	}
	_, err = reg.Open(context.Background(), bmc.Target{Driver: "snmp", Address: "192.0.2.9", Password: "s3cret"})
	if !errors.Is(err, bmc.ErrUnsupportedDriver) {
		t.Fatalf("unknown driver: %v", err)
	}
	var oe *bmc.OpError
	if !errors.As(err, &oe) || oe.Driver != "snmp" || oe.Addr != "192.0.2.9" {
		t.Errorf("OpError = %+v", oe)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Error("the error shows the password")
	}
	if opened != 1 {
		t.Error("an opener ran for an unknown driver")
	}
}

func TestOpErrorMatchesKindAndCause(t *testing.T) {
	cause := errors.New("connection refused")
	err := fmt.Errorf("power cycle: %w", &bmc.OpError{Driver: "ipmi", Op: "power", Addr: "192.0.2.7:623",
		Kind: bmc.ErrUnreachable, Message: "nothing answers", Err: cause})
	if !errors.Is(err, bmc.ErrUnreachable) || !errors.Is(err, cause) || errors.Is(err, bmc.ErrAuth) {
		t.Errorf("errors.Is mismatch for %v", err)
	}
	if got := bmc.KindOf(err); got != bmc.ErrUnreachable {
		t.Errorf("KindOf = %v", got)
	}
	if got := bmc.KindOf(context.DeadlineExceeded); got != bmc.ErrTimeout {
		t.Errorf("KindOf(deadline) = %v", got)
	}
	if bmc.KindOf(nil) != nil || bmc.KindOf(errors.New("other")) != nil {
		t.Error("KindOf invents a kind")
	}
	want := "bmc: unreachable (ipmi power 192.0.2.7:623): nothing answers"
	if got := err.(interface{ Unwrap() error }).Unwrap().Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestBootDeviceValidate(t *testing.T) {
	tests := []struct {
		dev  bmc.BootDevice
		want error
	}{
		{bmc.BootDevice{Target: bmc.BootPXE}, nil},
		{bmc.BootDevice{Target: bmc.BootHTTP, Mode: bmc.BootModeUEFI}, nil},
		{bmc.BootDevice{Target: bmc.BootHTTP, Mode: bmc.BootModeLegacy}, bmc.ErrInvalid},
		{bmc.BootDevice{Target: "floppy"}, bmc.ErrInvalid},
		{bmc.BootDevice{Target: bmc.BootDisk, Mode: "bios"}, bmc.ErrInvalid},
		{bmc.BootDevice{}, bmc.ErrInvalid},
	}
	for _, tc := range tests {
		if err := tc.dev.Validate(); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%+v: Validate() = %v, want %v", tc.dev, err, tc.want)
		}
	}
	for _, a := range []bmc.PowerAction{bmc.PowerActionOn, bmc.PowerActionOff, bmc.PowerActionForceOff, bmc.PowerActionCycle, bmc.PowerActionReset} {
		if !a.Valid() {
			t.Errorf("%s not valid", a)
		}
	}
	if bmc.PowerAction("halt").Valid() {
		t.Error("halt is valid")
	}
}

func TestRunnerDoesNotSendARepeatTwice(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	j := &bmc.MemoryJournal{Window: 10 * time.Minute}
	r := &bmc.Runner{Journal: j, Clock: clk}
	ctx := context.Background()
	sent := 0
	power := func(context.Context) error { sent++; return nil }

	for i := range 3 {
		replayed, err := r.RunReport(ctx, "op-1", "power", power)
		if err != nil || replayed != (i > 0) {
			t.Fatalf("run %d: replayed %v, err %v", i, replayed, err)
		}
		clk.Advance(time.Minute)
	}
	if sent != 1 {
		t.Errorf("sent %d times, want 1", sent)
	}
	// After the window the id is new again.
	clk.Advance(10 * time.Minute)
	if err := r.Run(ctx, "op-1", "power", power); err != nil || sent != 2 {
		t.Errorf("after the window: err %v, sent %d", err, sent)
	}
	// An empty id always runs.
	for range 2 {
		_ = r.Run(ctx, "", "power", power)
	}
	if sent != 4 {
		t.Errorf("empty ids: sent %d, want 4", sent)
	}
}

func TestRunnerReplaysAFailure(t *testing.T) {
	clk := clocktest.New(time.Unix(1e9, 0))
	r := &bmc.Runner{Journal: &bmc.MemoryJournal{}, Clock: clk}
	calls := 0
	fail := func(context.Context) error {
		calls++
		return &bmc.OpError{Driver: "redfish", Op: "set-boot", Kind: bmc.ErrTimeout, Message: "no answer; PropertyValueNotInList"}
	}
	first := r.Run(context.Background(), "op-2", "set-boot", fail)
	second := r.Run(context.Background(), "op-2", "set-boot", fail)
	if calls != 1 {
		t.Fatalf("calls = %d", calls)
	}
	if !errors.Is(first, bmc.ErrTimeout) || errors.Is(first, bmc.ErrReplayed) {
		t.Errorf("first = %v", first)
	}
	if !errors.Is(second, bmc.ErrTimeout) || !errors.Is(second, bmc.ErrReplayed) || !strings.Contains(second.Error(), "PropertyValueNotInList") {
		t.Errorf("second = %v", second)
	}
}

func TestRunnerRetriesAFailureThatDidNotApply(t *testing.T) {
	for _, kind := range []error{bmc.ErrUnreachable, bmc.ErrAuth, bmc.ErrRefused} {
		r := &bmc.Runner{}
		calls := 0
		fn := func(context.Context) error {
			calls++
			if calls == 1 {
				return &bmc.OpError{Op: "power", Kind: kind}
			}
			return nil
		}
		first := r.Run(context.Background(), "op-5", "power", fn)
		second := r.Run(context.Background(), "op-5", "power", fn)
		third := r.Run(context.Background(), "op-5", "power", fn)
		if !errors.Is(first, kind) || second != nil || third != nil || calls != 2 {
			t.Errorf("%v: first %v, second %v, third %v, calls %d; want the retry to run once more", kind, first, second, third, calls)
		}
	}
}

func TestRunnerRefusesARepeatWhileRunning(t *testing.T) {
	r := &bmc.Runner{}
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- r.Run(context.Background(), "op-3", "firmware-update", func(context.Context) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	err := r.Run(context.Background(), "op-3", "firmware-update", func(context.Context) error {
		t.Error("a repeat ran while the first was running")
		return nil
	})
	if !errors.Is(err, bmc.ErrInProgress) {
		t.Errorf("repeat while running: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), "op-3", "firmware-update", func(context.Context) error { return errors.New("ran") }); err != nil {
		t.Errorf("repeat after success: %v", err)
	}
}

func TestMemoryJournalIsBounded(t *testing.T) {
	clk := clocktest.New(time.Unix(1e9, 0))
	j := &bmc.MemoryJournal{Window: time.Hour, Size: 3}
	r := &bmc.Runner{Journal: j, Clock: clk}
	ok := func(context.Context) error { return nil }
	for i := range 10 {
		_ = r.Run(context.Background(), fmt.Sprint("id-", i), "power", ok)
		clk.Advance(time.Second)
	}
	if j.Len() > 3 {
		t.Errorf("journal holds %d records, bound 3", j.Len())
	}
	// The newest ids are still remembered, the oldest forgotten.
	ran := false
	_ = r.Run(context.Background(), "id-9", "power", func(context.Context) error { ran = true; return nil })
	if ran {
		t.Error("the newest id was forgotten")
	}
	_ = r.Run(context.Background(), "id-0", "power", func(context.Context) error { ran = true; return nil })
	if !ran {
		t.Error("the oldest id was kept beyond the bound")
	}
}

type brokenJournal struct{}

func (brokenJournal) Claim(context.Context, string, string, time.Time) (bmc.Record, bool, error) {
	return bmc.Record{}, false, errors.New("disk full")
}
func (brokenJournal) Finish(context.Context, bmc.Record) error { return nil }

func TestRunnerDoesNotSendWhenTheJournalFails(t *testing.T) {
	r := &bmc.Runner{Journal: brokenJournal{}}
	err := r.Run(context.Background(), "op-4", "power", func(context.Context) error {
		t.Error("sent without a journal record")
		return nil
	})
	if err == nil {
		t.Fatal("no error")
	}
}
