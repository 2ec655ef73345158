package bmc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/ipmi/ipmitest"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/hwid"
)

// TestOpKinds states, for every command kind, the operation ParseOp makes of it: its
// journal name, whether it is destructive and the capability it needs.
func TestOpKinds(t *testing.T) {
	img := bmc.StaticURL("https://cache.example/t/GRANT/abc")
	args := bmc.Args{Device: "pxe", Mode: "uefi", Action: "cycle", NewCredential: "vault:new", Image: img}
	want := map[bmc.Kind]string{
		bmc.KindQuery:       "query destructive=false inspect",
		bmc.KindStorage:     "storage destructive=false storage",
		bmc.KindPower:       "power destructive=true power",
		bmc.KindBoot:        "set-boot destructive=true boot",
		bmc.KindRotate:      "rotate destructive=true rotate",
		bmc.KindFirmware:    "firmware destructive=true firmware",
		bmc.KindMediaInsert: "media-insert destructive=true media",
		bmc.KindMediaEject:  "media-eject destructive=true media",
	}
	got := map[bmc.Kind]string{}
	for _, k := range bmc.Kinds {
		op, err := bmc.ParseOp(string(k), args)
		if err != nil {
			t.Errorf("ParseOp(%s): %v", k, err)
			continue
		}
		if op.Kind() != k {
			t.Errorf("ParseOp(%s).Kind() = %s", k, op.Kind())
		}
		got[k] = fmt.Sprintf("%s destructive=%v %s", op.Name(), bmc.IsDestructive(op), op.Capability())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
	if !bmc.KindStorage.Destructive() {
		t.Error("bmc.storage is not destructive: its volume and erase operations are")
	}
	for _, a := range []string{bmc.StorageCreateVolume, bmc.StorageDeleteVolume, bmc.StorageEraseDrive} {
		op, err := bmc.ParseOp("bmc.storage", bmc.Args{StorageAction: a, RAIDType: "RAID1", Drives: []string{"Disk.0"}, Volume: "1"})
		if err != nil || !bmc.IsDestructive(op) || op.Name() != a || op.Capability() != bmc.CapVolumes {
			t.Errorf("storage %s: %v, %v: want a destructive %s of capability volumes", a, op, err, a)
		}
	}
	if _, err := bmc.ParseOp("bmc.storage", bmc.Args{StorageAction: "format"}); !errors.Is(err, bmc.ErrInvalid) {
		t.Errorf("storage action format: %v, want ErrInvalid", err)
	}
	if bmc.Kind("bmc.reboot").Destructive() || bmc.Kind("bmc.reboot").Valid() {
		t.Error("an unknown kind is valid or destructive")
	}

	for name, c := range map[string]struct {
		kind string
		args bmc.Args
	}{
		"unknown kind":          {"bmc.reboot", args},
		"power action":          {"bmc.power", bmc.Args{Action: "sideways"}},
		"boot device":           {"bmc.boot", bmc.Args{Device: "floppy"}},
		"http boot in legacy":   {"bmc.boot", bmc.Args{Device: "http", Mode: "legacy"}},
		"rotate without secret": {"bmc.rotate", bmc.Args{Username: "root"}},
		"firmware, no image":    {"bmc.firmware", bmc.Args{}},
		"media, no image":       {"bmc.mediaInsert", bmc.Args{}},
	} {
		if _, err := bmc.ParseOp(c.kind, c.args); !errors.Is(err, bmc.ErrInvalid) {
			t.Errorf("%s: ParseOp = %v, want ErrInvalid", name, err)
		}
	}
}

// bareDriver is a driver with no capability at all.
type bareDriver struct{}

func (bareDriver) Name() string { return "bare" }
func (bareDriver) Close() error { return nil }

// TestDoWithoutTheCapability: every operation on a driver that lacks its capability is
// ErrUnsupported (and ErrNoCapability), the image URL is never asked for, and through an
// Executor the outcome says "unsupported" while a destructive one is still journaled.
func TestDoWithoutTheCapability(t *testing.T) {
	var asked atomic.Int32
	img := func(context.Context) (string, error) { asked.Add(1); return "https://x/y", nil }
	ops := []bmc.Op{bmc.Query{}, bmc.ListStorage{}, bmc.SetPower{Action: bmc.PowerActionOn},
		bmc.SetBoot{Device: bmc.BootDevice{Target: bmc.BootPXE}}, bmc.Rotate{Username: "u", NewPassword: "p"},
		bmc.Firmware{Image: img}, bmc.InsertMedia{Image: img}, bmc.EjectMedia{}}
	for _, op := range ops {
		_, err := bmc.Do(context.Background(), bareDriver{}, op)
		if !errors.Is(err, bmc.ErrUnsupported) || !errors.Is(err, bmc.ErrNoCapability) {
			t.Errorf("%s on a bare driver: %v, want ErrUnsupported and ErrNoCapability", op.Name(), err)
		}
		if err != nil && !strings.Contains(err.Error(), string(op.Capability())) {
			t.Errorf("%s: error %q does not name the capability", op.Name(), err)
		}
	}
	j := &bmc.MemoryJournal{}
	e := &bmc.Executor{Opener: bmc.OpenerFunc(func(context.Context, bmc.Target) (bmc.Driver, error) { return bareDriver{}, nil }),
		Journal: j}
	for i, op := range ops {
		r := e.RunOp(context.Background(), fmt.Sprint("cmd-", i), bmc.TargetRef{Driver: "bare", Address: "a"}, op)
		if r.Outcome.Kind != "unsupported" || r.Outcome.Status != bmc.StatusFailed {
			t.Errorf("%s through the Executor: %+v, want failed/unsupported", op.Name(), r.Outcome)
		}
	}
	if asked.Load() != 0 {
		t.Errorf("the image URL was asked for %d times for operations never sent", asked.Load())
	}
	if j.Len() != 6 {
		t.Errorf("journal holds %d records, want the 6 destructive operations", j.Len())
	}
	if _, err := bmc.Do(context.Background(), bareDriver{}, nil); !errors.Is(err, bmc.ErrInvalid) {
		t.Errorf("Do(nil op) = %v", err)
	}
	if r := e.RunOp(context.Background(), "x", bmc.TargetRef{Driver: "bare", Address: "a"}, bmc.SetPower{Action: "up"}); r.Outcome.Status != bmc.StatusNotSent || r.Outcome.Kind != "invalid" {
		t.Errorf("invalid op through the Executor: %+v", r.Outcome)
	}
}

// TestRotatePrintsNoPassword: a Rotate holding a password never prints it.
func TestRotatePrintsNoPassword(t *testing.T) {
	op := bmc.Rotate{Username: "root", NewCredential: "vault:new", NewPassword: "s3cr3t-pw"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("op", "op", op)
	for _, s := range []string{fmt.Sprint(op), fmt.Sprintf("%+v %#v %s %q %v", op, op, op, op, &op), logged.String()} {
		if strings.Contains(s, "s3cr3t") {
			t.Errorf("password printed: %s", s)
		}
	}
}

// opCheck is one operation run through Executor.RunOp and what the BMC must show after it.
type opCheck struct {
	name  string
	op    bmc.Op
	check func(t *testing.T, r bmc.Result)
}

// runOps runs each check's operation under a new id and checks it ended ok and what the
// BMC shows; a destructive operation is journaled, a non-destructive one is not.
func runOps(t *testing.T, e *bmc.Executor, j *bmc.MemoryJournal, tg bmc.TargetRef, checks []opCheck) {
	t.Helper()
	for i, c := range checks {
		before := j.Len()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r := e.RunOp(ctx, fmt.Sprintf("cmd-%d-%s", i, c.name), tg, c.op)
		cancel()
		if r.Outcome.Status != bmc.StatusOK || r.Replayed {
			t.Errorf("%s: %+v replayed=%v", c.name, r.Outcome, r.Replayed)
			continue
		}
		grew := j.Len() - before
		if want := map[bool]int{true: 1, false: 0}[bmc.IsDestructive(c.op)]; grew != want {
			t.Errorf("%s: journal grew by %d, want %d (destructive=%v)", c.name, grew, want, bmc.IsDestructive(c.op))
		}
		c.check(t, r)
	}
}

// TestOpsReachTheirCapabilityRedfish: every operation, parsed from its kind and arguments
// and run through Executor.RunOp, reaches the capability that carries it out on bmctest's
// fake Redfish BMC, which then shows its effect.
func TestOpsReachTheirCapabilityRedfish(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{TaskPolls: 1})
	t.Cleanup(srv.Close)
	reg := bmc.NewRegistry()
	_ = reg.Register(redfish.Name, redfish.Config{})
	creds := map[string]bmc.Credential{
		"vault:bmc": {Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword},
		"vault:new": {Username: bmctest.DefaultUsername, Password: "r0tated-pw"},
	}
	vault := bmc.CredentialsFunc(func(_ context.Context, ref string) (bmc.Credential, error) {
		c, ok := creds[ref]
		if !ok {
			return bmc.Credential{}, errors.New("no such credential")
		}
		if ref == "vault:bmc" && srv.Password(bmctest.DefaultUsername) == "r0tated-pw" {
			c.Password = "r0tated-pw" // the vault follows the rotation
		}
		return c, nil
	})
	j := &bmc.MemoryJournal{}
	e := &bmc.Executor{Opener: reg, Credentials: vault, Journal: j}
	tg := bmc.TargetRef{Driver: redfish.Name, Address: srv.URL, Credential: "vault:bmc"}
	const fwURL, isoURL = "https://cache.example/t/G1/fw.bin", "https://cache.example/t/G2/boot.iso"
	parse := func(kind string, a bmc.Args) bmc.Op {
		t.Helper()
		op, err := bmc.ParseOp(kind, a)
		if err != nil {
			t.Fatalf("ParseOp(%s): %v", kind, err)
		}
		return op
	}
	boot := func() map[string]any { return srv.Resource(bmctest.SystemPath)["Boot"].(map[string]any) }
	runOps(t, e, j, tg, []opCheck{
		{"query", parse("bmc.query", bmc.Args{}), func(t *testing.T, r bmc.Result) {
			q, ok := r.Value.(bmc.QueryResult)
			if !ok || !q.Inspected {
				t.Fatalf("query value %#v", r.Value)
			}
			uuid := srv.Resource(bmctest.SystemPath)["UUID"].(string)
			if !strings.EqualFold(q.Inventory.UUID.String(), uuid) || len(q.Inventory.NICs) == 0 {
				t.Errorf("inventory UUID %v NICs %d; the BMC has %s", q.Inventory.UUID, len(q.Inventory.NICs), uuid)
			}
			if want := strings.ToLower(srv.Resource(bmctest.SystemPath)["PowerState"].(string)); string(q.Power) != want {
				t.Errorf("power %q, the BMC says %q", q.Power, want)
			}
		}},
		{"storage", parse("bmc.storage", bmc.Args{}), func(t *testing.T, r bmc.Result) {
			disks, _ := r.Value.([]bmc.Disk)
			devs := srv.Resource(bmctest.SystemPath + "/SimpleStorage/1")["Devices"].([]any)
			if len(disks) == 0 || len(disks) > len(devs) {
				t.Errorf("disks %v; the BMC lists %d devices", disks, len(devs))
			}
		}},
		// The mockup starts with a Pxe override: ask for the CD.
		{"boot", parse("bmc.boot", bmc.Args{Device: "cd", Mode: "uefi"}), func(t *testing.T, r bmc.Result) {
			if b := boot(); b["BootSourceOverrideTarget"] != "Cd" || b["BootSourceOverrideEnabled"] != "Once" {
				t.Errorf("boot after bmc.boot cd: %v", b)
			}
		}},
		{"power", parse("bmc.power", bmc.Args{Action: "force-off"}), func(t *testing.T, r bmc.Result) {
			if p := srv.Resource(bmctest.SystemPath)["PowerState"]; p != "Off" {
				t.Errorf("PowerState after force-off: %v", p)
			}
		}},
		{"media-insert", parse("bmc.mediaInsert", bmc.Args{Image: bmc.StaticURL(isoURL)}), func(t *testing.T, r bmc.Result) {
			if cd := srv.Resource(bmctest.CD1Path); cd["Image"] != isoURL || cd["Inserted"] != true {
				t.Errorf("CD1 after insert: %v %v", cd["Image"], cd["Inserted"])
			}
		}},
		{"media-eject", parse("bmc.mediaEject", bmc.Args{}), func(t *testing.T, r bmc.Result) {
			if cd := srv.Resource(bmctest.CD1Path); cd["Inserted"] != false {
				t.Errorf("CD1 after eject: Inserted %v", cd["Inserted"])
			}
		}},
		{"firmware", parse("bmc.firmware", bmc.Args{Image: bmc.StaticURL(fwURL), Components: nil}), func(t *testing.T, r bmc.Result) {
			fr, _ := r.Value.(bmc.FirmwareResult)
			if fr.State != "Completed" || !slices.Equal(srv.Updates(), []string{fwURL}) {
				t.Errorf("firmware result %+v; updates applied %v", fr, srv.Updates())
			}
		}},
		{"rotate", parse("bmc.rotate", bmc.Args{NewCredential: "vault:new"}), func(t *testing.T, r bmc.Result) {
			if got := srv.Password(bmctest.DefaultUsername); got != "r0tated-pw" {
				t.Errorf("password on the BMC after rotate: %q", got)
			}
		}},
		// After the rotation the target's credential is fetched again: the next
		// operation logs in with the new password.
		{"query after rotate", bmc.Query{}, func(t *testing.T, r bmc.Result) {}},
	})
}

// TestOpsReachTheirCapabilityIPMI: the same on ipmi_sim through bmc/ipmi: query, power,
// boot and rotate reach the simulator; storage, firmware and media are unsupported by the
// driver, answered without contacting the BMC and without asking for an image URL.
func TestOpsReachTheirCapabilityIPMI(t *testing.T) {
	sim := ipmitest.StartSim(t, ipmitest.SimOptions{})
	reg := bmc.NewRegistry()
	_ = reg.Register(ipmi.Name, ipmi.Config{CipherSuites: []int{3}})
	const newPass = "rot8ted-pass"
	rotated := atomic.Bool{}
	vault := bmc.CredentialsFunc(func(_ context.Context, ref string) (bmc.Credential, error) {
		switch {
		case ref == "vault:new":
			return bmc.Credential{Username: ipmitest.User, Password: newPass}, nil
		case rotated.Load():
			return bmc.Credential{Username: ipmitest.User, Password: newPass}, nil
		}
		return bmc.Credential{Username: ipmitest.User, Password: ipmitest.Pass}, nil
	})
	j := &bmc.MemoryJournal{}
	e := &bmc.Executor{Opener: reg, Credentials: vault, Journal: j}
	tg := bmc.TargetRef{Driver: ipmi.Name, Address: sim.Addr, Credential: "vault:bmc"}
	raw, err := hwid.ParseUUID(ipmitest.GUID)
	if err != nil {
		t.Fatal(err)
	}
	sim.Calls(t)
	runOps(t, e, j, tg, []opCheck{
		{"query", bmc.Query{}, func(t *testing.T, r bmc.Result) {
			q, _ := r.Value.(bmc.QueryResult)
			if !q.Inspected || q.Inventory.UUIDRaw != raw || q.Inventory.NICsKnown {
				t.Errorf("query: %+v; want the simulator's GUID %v and no NICs", q, raw)
			}
			if q.Power != bmc.PowerOn && q.Power != bmc.PowerOff {
				t.Errorf("query power %q", q.Power)
			}
		}},
		{"force-off", bmc.SetPower{Action: bmc.PowerActionForceOff}, func(t *testing.T, r bmc.Result) { sim.Calls(t) }},
		{"power on", bmc.SetPower{Action: bmc.PowerActionOn}, func(t *testing.T, r bmc.Result) {
			if got := ipmitest.Sets(sim.Calls(t)); !slices.Equal(got, []string{"set power 1"}) {
				t.Errorf("chassis calls after power on: %v", got)
			}
		}},
		{"boot", bmc.SetBoot{Device: bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI}}, func(t *testing.T, r bmc.Result) {
			d := ipmitest.Dial(t, sim.Target())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if got, err := d.BootDevice(ctx); got != bmc.BootPXE || err != nil {
				t.Errorf("boot device read back: %q, %v", got, err)
			}
		}},
		{"rotate", bmc.Rotate{NewCredential: "vault:new"}, func(t *testing.T, r bmc.Result) {
			rotated.Store(true)
			if out, err := sim.Ipmitool(t, newPass, "chassis", "power", "status"); err != nil {
				t.Errorf("ipmitool with the rotated password: %v\n%s", err, out)
			}
		}},
		{"query after rotate", bmc.Query{}, func(t *testing.T, r bmc.Result) {}},
	})

	var asked atomic.Int32
	img := func(context.Context) (string, error) { asked.Add(1); return "https://x/y", nil }
	for _, op := range []bmc.Op{bmc.ListStorage{}, bmc.Firmware{Image: img}, bmc.InsertMedia{Image: img}, bmc.EjectMedia{}} {
		sim.Calls(t)
		r := e.RunOp(context.Background(), "unsupported-"+op.Name(), tg, op)
		if r.Outcome.Kind != "unsupported" {
			t.Errorf("%s on IPMI: %+v, want unsupported", op.Name(), r.Outcome)
		}
		if got := ipmitest.Sets(sim.Calls(t)); len(got) != 0 {
			t.Errorf("%s on IPMI changed the chassis: %v", op.Name(), got)
		}
	}
	if asked.Load() != 0 {
		t.Errorf("image URL asked for %d times", asked.Load())
	}
}

// TestQueryKeepsAPartialInspection: on ipmi_sim refusing its LAN address, Query keeps
// what it read (power, the GUID, the BMC's MAC) and names the part that failed, with
// ErrPartial.
func TestQueryKeepsAPartialInspection(t *testing.T) {
	sim := ipmitest.StartSim(t, ipmitest.SimOptions{})
	d := ipmitest.Dial(t, sim.Target())
	sim.FailLAN(t, "ip_addr")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := bmc.Do(ctx, d, bmc.Query{})
	q, _ := v.(bmc.QueryResult)
	if !errors.Is(err, bmc.ErrPartial) || !q.Inspected || q.Power == "" || !q.Inventory.HasUUID || q.Inventory.BMCMAC.IsZero() {
		t.Fatalf("query: %+v, %v; want power, the GUID, the BMC's MAC and ErrPartial", q, err)
	}
	if !slices.Equal(q.Failed, []string{"lan-address"}) {
		t.Errorf("failed parts %v, want [lan-address]", q.Failed)
	}
}

// FuzzParseOp: a command either parses into a valid operation of its own kind, whose
// destructive flag is its kind's, or is refused with ErrInvalid.
func FuzzParseOp(f *testing.F) {
	for _, k := range bmc.Kinds {
		f.Add(string(k), "pxe", "uefi", false, "cycle", "", "vault:new", true)
	}
	f.Add("bmc.boot", "http", "legacy", true, "", "", "", false)
	f.Add("bmc.power", "", "", false, "sideways", "", "", false)
	f.Fuzz(func(t *testing.T, kind, device, mode string, persistent bool, action, user, newCred string, image bool) {
		a := bmc.Args{Device: device, Mode: mode, Persistent: persistent, Action: action, Username: user, NewCredential: newCred}
		if image {
			a.Image = bmc.StaticURL("https://x/y")
		}
		op, err := bmc.ParseOp(kind, a)
		if err != nil {
			if !errors.Is(err, bmc.ErrInvalid) || op != nil {
				t.Fatalf("ParseOp(%q) = %v, %v; want nil and ErrInvalid", kind, op, err)
			}
			return
		}
		if string(op.Kind()) != kind || op.Validate() != nil || op.Name() == "" {
			t.Fatalf("ParseOp(%q) = %#v: kind %s, validate %v", kind, op, op.Kind(), op.Validate())
		}
	})
}
