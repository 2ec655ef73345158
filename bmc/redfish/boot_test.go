package redfish_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

func bootOf(srv *bmctest.Server) map[string]any {
	return srv.Resource(srv.SystemPath())["Boot"].(map[string]any)
}

// TestUEFIHTTPNotOfferedLeavesTheModeAsItWas: UEFI HTTP asked of a system in Legacy mode
// whose BMC does not offer UefiHttp in either mode. Where the BMC lists the modes and UEFI
// is not among them, nothing is written; where UEFI is listed, the mode is switched to
// see the targets of UEFI mode, and put back to Legacy when UefiHttp is still not there.
func TestUEFIHTTPNotOfferedLeavesTheModeAsItWas(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  bmctest.Options
		modes []any // changed from the capture when set: the modes the BMC lists
		want  []string
	}{
		{"DMTF mockup", bmctest.Options{}, nil, []string{"- - UEFI OK", "- - Legacy OK"}},
		{"Lenovo XCC", bmctest.Options{Vendor: bmctest.LenovoXCC}, nil, []string{"- - UEFI OK", "- - Legacy OK"}},
		{"OpenBMC capture", bmctest.Options{Mockup: bmctest.OpenBMC}, nil, []string{"- - UEFI OK", "- - Legacy OK"}},
		{"OpenBMC listing Legacy only", bmctest.Options{Mockup: bmctest.OpenBMC}, []any{"Legacy"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, d := start(t, tc.opts, redfish.Config{})
			// Changed from the capture: the system in Legacy mode (and the modes listed).
			boot := map[string]any{"BootSourceOverrideMode": "Legacy"}
			if tc.modes != nil {
				boot["BootSourceOverrideMode@Redfish.AllowableValues"] = tc.modes
			}
			srv.Patch(srv.SystemPath(), map[string]any{"Boot": boot})
			before := bootOf(srv)
			err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootHTTP})
			kindIs(t, err, bmc.ErrUnsupported)
			if diff := cmp.Diff(tc.want, patches(srv.Requests())); diff != "" {
				t.Errorf("PATCHes (-want +got):\n%s", diff)
			}
			after := bootOf(srv)
			for _, k := range []string{"BootSourceOverrideMode", "BootSourceOverrideTarget", "BootSourceOverrideEnabled"} {
				if after[k] != before[k] {
					t.Errorf("%s changed from %v to %v", k, before[k], after[k])
				}
			}
			if tc.want != nil && !strings.Contains(err.Error(), "put back to Legacy") {
				t.Errorf("error does not say the mode was put back: %v", err)
			}
		})
	}
}

// TestUEFIHTTPRefusedAfterTheSwitchPutsTheModeBack: the mode switch shows UefiHttp (as
// sushy-emulator does), but the override itself is refused: Legacy is put back.
func TestUEFIHTTPRefusedAfterTheSwitchPutsTheModeBack(t *testing.T) {
	srv, d := start(t, bmctest.Options{ModeDependentTargets: true, Vendor: bmctest.LenovoXCC}, redfish.Config{})
	srv.Patch(bmctest.SystemPath, map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "Legacy"}})
	// Lenovo XCC refuses Continuous.
	err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootHTTP, Persistent: true})
	kindIs(t, err, bmc.ErrUnsupported)
	want := []string{"- - UEFI OK", "UefiHttp Continuous UEFI Bad Request", "- - Legacy OK"}
	if diff := cmp.Diff(want, patches(srv.Requests())); diff != "" {
		t.Errorf("PATCHes (-want +got):\n%s", diff)
	}
	if m := bootOf(srv)["BootSourceOverrideMode"]; m != "Legacy" {
		t.Errorf("mode left %v", m)
	}
}

// TestExplicitModeOnABMCThatReportsNoMode: a BMC that neither reports nor accepts
// BootSourceOverrideMode (OpenBMC on GB200, here the OpenBMC capture served that way)
// cannot give an explicit mode: ErrUnsupported, never the override without it. Without
// an explicit mode the override is set without the property.
func TestExplicitModeOnABMCThatReportsNoMode(t *testing.T) {
	srv, d := start(t, bmctest.Options{Mockup: bmctest.OpenBMC, NoBootMode: true}, redfish.Config{})
	for i, mode := range []bmc.BootMode{bmc.BootModeUEFI, bmc.BootModeLegacy, bmc.BootModeUEFI} {
		srv.ResetRequests()
		err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE, Mode: mode})
		kindIs(t, err, bmc.ErrUnsupported)
		if !strings.Contains(err.Error(), "does not report its mode") {
			t.Errorf("%s: %v", mode, err)
		}
		for _, p := range patches(srv.Requests()) {
			if !strings.HasSuffix(p, "Bad Request") {
				t.Errorf("%s: an override was written: %s", mode, p)
			}
		}
		if i > 0 && len(patches(srv.Requests())) != 0 { // learned after the first
			t.Errorf("%s: PATCHes %v after the refusal was learned", mode, patches(srv.Requests()))
		}
	}
	if b := bootOf(srv); b["BootSourceOverrideEnabled"] != "Disabled" {
		t.Errorf("override set: %v", b)
	}
	srv.ResetRequests()
	if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Pxe Once - OK"}, patches(srv.Requests())); diff != "" {
		t.Errorf("PATCHes (-want +got):\n%s", diff)
	}
}

// TestTookEffectDifferentlyIsNeverSentAgain runs a one-time override through the Executor
// on a BMC that keeps it as Continuous (as sushy-emulator does): the outcome is "differs",
// saying what the BMC kept, recorded as done; the same command id again, also after a
// restart of the journal's process, is answered from the journal and never PATCHes again.
// The claim registry records the same outcome, and a failover reuses it.
func TestTookEffectDifferentlyIsNeverSentAgain(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{OnceStoredAsContinuous: true})
	t.Cleanup(srv.Close)
	reg := &bmc.ClaimRegistry{Store: &bmc.MemoryClaimStore{}}
	dir := t.TempDir()
	newExecutor := func(j bmc.Journal) *bmc.Executor {
		return &bmc.Executor{
			Opener: redfish.Config{PollInterval: time.Millisecond},
			Credentials: bmc.CredentialsFunc(func(context.Context, string) (bmc.Credential, error) {
				return bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}, nil
			}),
			Journal: j,
			Claims:  reg.For("agent-a"),
		}
	}
	tg := bmc.TargetRef{Driver: redfish.Name, Address: srv.URL, Credential: "ref"}
	op := bmc.SetBoot{Device: bmc.BootDevice{Target: bmc.BootPXE}}
	j, err := bmc.OpenFileJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	res := newExecutor(j).RunOp(context.Background(), "cmd-1", tg, op)
	if res.Outcome.Status != bmc.StatusDiffers || res.Outcome.Kind != "differs" || res.Replayed ||
		!strings.Contains(res.Outcome.Message, "kept BootSourceOverrideEnabled Continuous (asked Once)") {
		t.Fatalf("first run: %+v", res)
	}
	if n := len(patches(srv.Requests())); n != 1 {
		t.Fatalf("%d PATCHes in the first run", n)
	}
	if err := res.Outcome.Err(); !errors.Is(err, bmc.ErrDiffers) {
		t.Errorf("Outcome.Err() = %v", err)
	}
	again := newExecutor(j).RunOp(context.Background(), "cmd-1", tg, op)
	if again.Outcome != res.Outcome || !again.Replayed {
		t.Errorf("repeat: %+v, want the first outcome replayed", again)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// The agent restarts: the journal on disk still says done.
	j, err = bmc.OpenFileJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	after := newExecutor(j).RunOp(context.Background(), "cmd-1", tg, op)
	if after.Outcome != res.Outcome || !after.Replayed {
		t.Errorf("after a restart: %+v, want the first outcome replayed", after)
	}
	if n := len(patches(srv.Requests())); n != 1 {
		t.Errorf("the override was PATCHed %d times", n)
	}
	// Another node is routed the command after a failover: the outcome is reused.
	dec, err := reg.Route(context.Background(), "cmd-1", "set-boot", "agent-b")
	if err != nil || dec.Action != bmc.RouteReuse || dec.Outcome != res.Outcome {
		t.Errorf("route after a failover: %+v, %v", dec, err)
	}
}

// TestTookEffectDifferentlyWithoutClaims: an Executor alone (its in-memory journal, no
// claim protocol) and a Runner answer a repeat from the journal too.
func TestTookEffectDifferentlyWithoutClaims(t *testing.T) {
	srv, d := start(t, bmctest.Options{OnceStoredAsContinuous: true}, redfish.Config{})
	e := &bmc.Executor{Opener: redfish.Config{PollInterval: time.Millisecond},
		Credentials: bmc.CredentialsFunc(func(context.Context, string) (bmc.Credential, error) {
			return bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}, nil
		})}
	tg := bmc.TargetRef{Driver: redfish.Name, Address: srv.URL, Credential: "ref"}
	op := bmc.SetBoot{Device: bmc.BootDevice{Target: bmc.BootCD}}
	for i := range 2 {
		res := e.RunOp(context.Background(), "cmd-2", tg, op)
		if res.Outcome.Status != bmc.StatusDiffers || res.Replayed != (i > 0) {
			t.Errorf("executor run %d: %+v", i, res)
		}
	}
	var r bmc.Runner
	for i := range 2 {
		replayed, err := r.RunReport(context.Background(), "cmd-3", "set-boot", func(ctx context.Context) error {
			return d.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootDisk})
		})
		if !errors.Is(err, bmc.ErrDiffers) || replayed != (i > 0) || errors.Is(err, bmc.ErrReplayed) != (i > 0) ||
			!strings.Contains(err.Error(), "kept BootSourceOverrideEnabled Continuous") {
			t.Errorf("runner run %d: replayed %v, %v", i, replayed, err)
		}
	}
	if n := len(patches(srv.Requests())); n != 2 {
		t.Errorf("%d PATCHes for two operations run twice each; want 2", n)
	}
}
