package ipmi_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
)

// TestQuirkIPMIUserSetupOrder: against ipmi_sim. The order is the one every BMC in the
// issue's sources accepts: name and password before the user is enabled (Dell R420, seen
// by Ironic and bmclib users), privilege before LAN messaging (Supermicro), a free slot
// is empty or "(Empty User)" (HPE iLO), never user 1 (the anonymous user); the password
// is bmc.NewPassword's, which Huawei's "no repeated characters" and the other listed
// policies accept. The new account then logs in with ipmitool and our driver.
func TestQuirkIPMIUserSetupOrder(t *testing.T) {
	s := startSim(t)
	d := dial(t, s)
	var steps []string
	ipmi.OnUserStep(d, func(step string) { steps = append(steps, step) })
	pw, err := bmc.NewPassword(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := d.AddUser(ctx(t), "deploy", pw, ipmi.PrivilegeAdmin)
	if err != nil {
		t.Fatalf("AddUser: %v", err)
	}
	want := []string{"set-name", "set-password", "set-privilege", "enable-messaging", "enable-user", "test-password"}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if id < 4 { // users 2 and 3 are the simulator's accounts; 1 is anonymous
		t.Errorf("AddUser took slot %d, which is in use or the anonymous user", id)
	}
	if out, err := s.ipmitoolAs(t, "deploy", pw, "chassis", "power", "status"); err != nil {
		t.Errorf("ipmitool as the new user: %v\n%s", err, out)
	}
	tg := s.target()
	tg.Username, tg.Password = "deploy", pw
	d2, err := ipmi.Dial(ctx(t), ipmi.Config{CipherSuites: []int{3}}, tg)
	if err != nil {
		t.Fatalf("Dial as the new user: %v", err)
	}
	_ = d2.Close()

	// A second AddUser of the same name is refused; rotation is the way.
	_, err = d.AddUser(ctx(t), "deploy", pw, ipmi.PrivilegeAdmin)
	kindIs(t, err, bmc.ErrInvalid)
	if !strings.Contains(err.Error(), "rotate") {
		t.Errorf("error does not point at rotation: %v", err)
	}
	pw2, _ := bmc.NewPassword(nil)
	if err := d.RotatePassword(ctx(t), "deploy", pw2); err != nil {
		t.Fatalf("RotatePassword: %v", err)
	}
	if out, err := s.ipmitoolAs(t, "deploy", pw2, "chassis", "power", "status"); err != nil {
		t.Errorf("ipmitool with the rotated password: %v\n%s", err, out)
	}
	// HPE's name for an unused slot is no account to rotate or create.
	kindIs(t, d.RotatePassword(ctx(t), "(Empty User)", pw2), bmc.ErrInvalid)
	_, err = d.AddUser(ctx(t), "(Empty User)", pw2, ipmi.PrivilegeUser)
	kindIs(t, err, bmc.ErrInvalid)
}
