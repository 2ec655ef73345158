package ipmi_test

import (
	"context"
	"errors"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

// The process forker of internal/testpeer lives as long as the test binary.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testpeer.IgnoreForker)
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func kindIs(t *testing.T, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error %v, want kind %v", err, kind)
	}
	var oe *bmc.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("error %T is not a *bmc.OpError", err)
	}
}

// ipmitoolPower reads the power state as ipmitool sees it.
func ipmitoolPower(t *testing.T, s *sim) bmc.PowerState {
	t.Helper()
	out := s.mustIpmitool(t, "chassis", "power", "status")
	switch {
	case strings.Contains(out, "Chassis Power is on"):
		return bmc.PowerOn
	case strings.Contains(out, "Chassis Power is off"):
		return bmc.PowerOff
	}
	t.Fatalf("ipmitool power status: %q", out)
	return ""
}

func TestPowerAgainstIpmiSim(t *testing.T) {
	s := startSim(t)
	d := dial(t, s)
	steps := []struct {
		action    bmc.PowerAction
		wantSets  []string // chassis-control calls the BMC made
		wantState bmc.PowerState
	}{
		{bmc.PowerActionOn, []string{"set power 1"}, bmc.PowerOn},
		{bmc.PowerActionOn, []string{}, bmc.PowerOn}, // already on: nothing sent
		{bmc.PowerActionReset, []string{"set reset 1"}, bmc.PowerOn},
		{bmc.PowerActionOff, []string{"set shutdown 1"}, bmc.PowerOff},
		{bmc.PowerActionForceOff, []string{}, bmc.PowerOff},          // already off
		{bmc.PowerActionCycle, []string{"set power 1"}, bmc.PowerOn}, // off: a cycle powers on
		{bmc.PowerActionForceOff, []string{"set power 0"}, bmc.PowerOff},
		{bmc.PowerActionOn, []string{"set power 1"}, bmc.PowerOn},
	}
	s.calls(t)
	for i, st := range steps {
		if err := d.SetPower(ctx(t), st.action); err != nil {
			t.Fatalf("step %d %s: %v", i, st.action, err)
		}
		if diff := cmp.Diff(st.wantSets, sets(s.calls(t))); diff != "" {
			t.Errorf("step %d %s: chassis calls (-want +got):\n%s", i, st.action, diff)
		}
		got, err := d.PowerState(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if got != st.wantState {
			t.Errorf("step %d %s: PowerState = %s, want %s", i, st.action, got, st.wantState)
		}
		if it := ipmitoolPower(t, s); it != got {
			t.Errorf("step %d: ipmitool says %s, we say %s", i, it, got)
		}
		s.calls(t)
	}
	// A cycle of a running machine: the BMC powers it down and up again.
	if err := d.SetPower(ctx(t), bmc.PowerActionCycle); err != nil {
		t.Fatal(err)
	}
	var calls []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !slices.Contains(calls, "set power 1") {
		calls = append(calls, sets(s.calls(t))...)
		time.Sleep(50 * time.Millisecond)
	}
	if diff := cmp.Diff([]string{"set power 0", "set power 1"}, calls); diff != "" {
		t.Errorf("cycle: chassis calls (-want +got):\n%s", diff)
	}
	kindIs(t, d.SetPower(ctx(t), "sideways"), bmc.ErrInvalid)
}

func TestIpmitoolChangesAreSeenByUs(t *testing.T) {
	s := startSim(t)
	d := dial(t, s)
	for _, arg := range []string{"on", "off", "on"} {
		s.mustIpmitool(t, "chassis", "power", arg)
		got, err := d.PowerState(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != arg {
			t.Errorf("after ipmitool power %s we read %s", arg, got)
		}
	}
}

// ipmitoolSelector returns the boot device selector line of `chassis bootparam get 5`.
var selectorRE = regexp.MustCompile(`Boot Device Selector : (.*)`)

func TestBootDeviceAgreesWithIpmitool(t *testing.T) {
	s := startSim(t)
	d := dial(t, s)
	tests := []struct {
		target       bmc.BootTarget
		ipmitoolArg  string // the same device through ipmitool bootdev
		ipmitoolSays string
		simBoot      string // what the BMC told the chassis script
	}{
		{bmc.BootPXE, "pxe", "Force PXE", "pxe"},
		{bmc.BootDisk, "disk", "Force Boot from default Hard-Drive", "default"},
		{bmc.BootCD, "cdrom", "Force Boot from CD/DVD", "cdrom"},
		{bmc.BootBIOSSetup, "bios", "Force Boot into BIOS Setup", "bios"},
	}
	for _, tc := range tests {
		t.Run(string(tc.target), func(t *testing.T) {
			s.calls(t)
			if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: tc.target, Mode: bmc.BootModeUEFI}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"set boot " + tc.simBoot}, sets(s.calls(t))); diff != "" {
				t.Errorf("chassis calls (-want +got):\n%s", diff)
			}
			m := selectorRE.FindStringSubmatch(s.mustIpmitool(t, "chassis", "bootparam", "get", "5"))
			if m == nil || strings.TrimSpace(m[1]) != tc.ipmitoolSays {
				t.Errorf("ipmitool reads %q, want %q", m, tc.ipmitoolSays)
			}
			got, err := d.BootDevice(ctx(t))
			if err != nil || got != tc.target {
				t.Errorf("BootDevice() = %q, %v; want %q", got, err, tc.target)
			}
			// And the other way round: ipmitool sets none, then this device; we read it.
			s.mustIpmitool(t, "chassis", "bootdev", "none")
			if got, _ := d.BootDevice(ctx(t)); got != bmc.BootNone {
				t.Errorf("after ipmitool bootdev none we read %q", got)
			}
			s.mustIpmitool(t, "chassis", "bootdev", tc.ipmitoolArg)
			if got, _ := d.BootDevice(ctx(t)); got != tc.target {
				t.Errorf("after ipmitool bootdev %s we read %q", tc.ipmitoolArg, got)
			}
		})
	}
	kindIs(t, d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootHTTP}), bmc.ErrUnsupported)
	if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootNone}); err != nil {
		t.Fatal(err)
	}
	if m := selectorRE.FindStringSubmatch(s.mustIpmitool(t, "chassis", "bootparam", "get", "5")); m == nil || m[1] != "No override" {
		t.Errorf("after BootNone ipmitool reads %q", m)
	}
}

var guidRE = regexp.MustCompile(`System GUID\s*:\s*([0-9a-fA-F-]{36})`)

func TestInspectGUIDAndLAN(t *testing.T) {
	s := startSim(t)
	d := dial(t, s)
	inv, err := d.Inspect(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := hwid.ParseUUID(simGUID)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.HasUUID || inv.UUIDRaw != raw {
		t.Errorf("raw GUID = %v, want the configured bytes %v", inv.UUIDRaw, raw)
	}
	if inv.UUID != raw.SMBIOS() {
		t.Errorf("UUID = %v, want the SMBIOS reading %v", inv.UUID, raw.SMBIOS())
	}
	m := guidRE.FindStringSubmatch(s.mustIpmitool(t, "mc", "guid"))
	if m == nil {
		t.Fatal("ipmitool mc guid printed no GUID")
	}
	printed, err := hwid.ParseUUID(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if printed != inv.UUIDRaw.Reversed() {
		t.Errorf("ipmitool prints %v, our raw GUID reversed is %v", printed, inv.UUIDRaw.Reversed())
	}
	if inv.NICsKnown || len(inv.NICs) != 0 {
		t.Errorf("IPMI invented NICs: known=%v %v", inv.NICsKnown, inv.NICs)
	}
	lan := s.mustIpmitool(t, "lan", "print", "1")
	if inv.BMCMAC.IsZero() || !strings.Contains(strings.ToLower(lan), inv.BMCMAC.String()) {
		t.Errorf("BMC MAC %v not what ipmitool lan print shows:\n%s", inv.BMCMAC, lan)
	}
	if len(inv.BMCAddrs) != 1 || !strings.Contains(lan, inv.BMCAddrs[0].String()) {
		t.Errorf("BMC addrs %v not what ipmitool lan print shows", inv.BMCAddrs)
	}
}

func TestRotatePassword(t *testing.T) {
	s := startSim(t)
	d := dial(t, s)
	const newPass = "n3w-pass"
	if err := d.RotatePassword(ctx(t), simUser, newPass); err != nil {
		t.Fatal(err)
	}
	// The open session stays usable.
	if _, err := d.PowerState(ctx(t)); err != nil {
		t.Errorf("session after rotation: %v", err)
	}
	if out, err := s.ipmitool(t, newPass, "chassis", "power", "status"); err != nil {
		t.Errorf("ipmitool with the new password: %v\n%s", err, out)
	}
	if _, err := s.ipmitool(t, simPass, "chassis", "power", "status"); err == nil {
		t.Error("ipmitool with the old password still works")
	}
	tg := s.target()
	_, err := ipmi.Dial(ctx(t), ipmi.Config{CipherSuites: []int{3}}, tg)
	kindIs(t, err, bmc.ErrAuth)
	tg.Password = newPass
	d2, err := ipmi.Dial(ctx(t), ipmi.Config{CipherSuites: []int{3}}, tg)
	if err != nil {
		t.Fatalf("Dial with the new password: %v", err)
	}
	_ = d2.Close()

	// Another user. (ipmi_sim 2.0.33 accepts a 20-byte password but then refuses it at
	// login, ipmitool's too, so the simulator is shown 16 bytes or fewer.)
	const opPass = "sixteen-bytes-pw"
	if err := d.RotatePassword(ctx(t), "operator3", opPass); err != nil {
		t.Fatal(err)
	}
	op := bmc.Target{Address: s.addr, Username: "operator3", Password: opPass}
	d3, err := ipmi.Dial(ctx(t), ipmi.Config{CipherSuites: []int{3}}, op)
	if err != nil {
		t.Fatalf("operator3 with its new password: %v", err)
	}
	_ = d3.Close()
	if out, err := s.ipmitoolAs(t, "operator3", opPass, "chassis", "power", "status"); err != nil {
		t.Errorf("ipmitool as operator3 with the new password: %v\n%s", err, out)
	}
	kindIs(t, d.RotatePassword(ctx(t), "nobody", "x"), bmc.ErrInvalid)
	kindIs(t, d.RotatePassword(ctx(t), simUser, strings.Repeat("x", 21)), bmc.ErrInvalid)
}

func TestWrongCredentials(t *testing.T) {
	s := startSim(t)
	for _, tc := range []struct{ name, user, pass string }{
		{"password", simUser, "wrong"},
		{"user", "nobody", simPass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := ipmi.Dial(ctx(t), ipmi.Config{CipherSuites: []int{3}},
				bmc.Target{Address: s.addr, Username: tc.user, Password: tc.pass})
			kindIs(t, err, bmc.ErrAuth)
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("took %v", el)
			}
			if strings.Contains(err.Error(), tc.pass) && tc.pass != simPass {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	// Nothing listens: the kernel answers port unreachable.
	port := testpeer.FreePort(t, "udp")
	start := time.Now()
	_, err := ipmi.Dial(ctx(t), ipmi.Config{CipherSuites: []int{3}},
		bmc.Target{Address: "127.0.0.1:" + strconv.Itoa(port), Username: simUser, Password: simPass})
	kindIs(t, err, bmc.ErrUnreachable)
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("refused port took %v", el)
	}

	// Something swallows the datagrams and never answers: bounded by timeout x attempts.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	start = time.Now()
	_, err = ipmi.Dial(ctx(t), ipmi.Config{CipherSuites: []int{3}, Timeout: 200 * time.Millisecond, Retries: 1},
		bmc.Target{Address: pc.LocalAddr().String(), Username: simUser, Password: simPass})
	kindIs(t, err, bmc.ErrUnreachable)
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("silent port took %v (want about 2 x 200ms)", el)
	}

	// A context deadline shorter than the retries wins.
	c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = ipmi.Dial(c, ipmi.Config{CipherSuites: []int{3}, Timeout: time.Second, Retries: 5},
		bmc.Target{Address: pc.LocalAddr().String(), Username: simUser, Password: simPass})
	if err == nil {
		t.Fatal("Dial to a silent port succeeded")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("deadline of 300ms honoured after %v", el)
	}
}

func TestCloseTwiceAndAfterClose(t *testing.T) {
	s := startSim(t)
	var events []string
	cfg := ipmi.Config{CipherSuites: []int{3}, OnOp: func(ev bmc.OpEvent) {
		kind := "ok"
		if k := bmc.KindOf(ev.Err); k != nil {
			kind = k.Error()
		}
		events = append(events, ev.Op+" "+kind)
	}}
	d, err := ipmi.Dial(ctx(t), cfg, s.target())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.PowerState(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, err = d.PowerState(ctx(t))
	kindIs(t, err, bmc.ErrClosed)
	want := []string{"open ok", "power-state ok", "power-state " + bmc.ErrClosed.Error()}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("OnOp events (-want +got):\n%s", diff)
	}
}

func TestDefaultCipherSuitesFallBackTo3(t *testing.T) {
	s := startSim(t)
	start := time.Now()
	d, err := ipmi.Dial(ctx(t), ipmi.Config{}, s.target())
	if err != nil {
		t.Fatalf("Dial with suites 17 then 3: %v", err)
	}
	t.Logf("connect trying 17 then 3: %v", time.Since(start))
	defer d.Close()
	if _, err := d.PowerState(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestRegistryOpensIPMI(t *testing.T) {
	s := startSim(t)
	reg := bmc.NewRegistry()
	if err := reg.Register(ipmi.Name, ipmi.Config{CipherSuites: []int{3}}); err != nil {
		t.Fatal(err)
	}
	d, err := reg.Open(ctx(t), s.target())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, ok := d.(bmc.VirtualMediaController); ok {
		t.Error("the IPMI driver claims virtual media")
	}
	if _, ok := d.(bmc.Inspector); !ok {
		t.Error("the IPMI driver does not inspect")
	}
	_, err = reg.Open(ctx(t), bmc.Target{Driver: "smoke-signals", Address: s.addr})
	kindIs(t, err, bmc.ErrUnsupportedDriver)
}
