package ipmi

import (
	"context"
	"errors"
	"strconv"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/app"
	"github.com/bougou/go-ipmi/pkg/types"
)

// Privilege is the highest privilege an account AddUser creates may use.
type Privilege uint8

// Privileges (IPMI 2.0 table 22-28).
const (
	PrivilegeUser     Privilege = 2
	PrivilegeOperator Privilege = 3
	PrivilegeAdmin    Privilege = 4
)

// emptyUser is the name HPE iLO gives unused user slots.
const emptyUser = "(Empty User)"

// freeSlot says whether a user slot's name marks it unused: no name, or HPE's
// "(Empty User)".
func freeSlot(name string) bool { return name == "" || name == emptyUser }

// AddUser creates an IPMI account in the first free user slot and returns its id. The
// order is the one every BMC listed here accepts:
//
//  1. the slot: never user 1 (the anonymous user) nor a fixed-name id, and a slot is free
//     when its name is empty or "(Empty User)" (HPE lists unused slots so);
//  2. Set User Name, then Set User Password, before the user is enabled (a Dell R420
//     refuses to enable a user without them);
//  3. Set User Access with the privilege alone, then again with IPMI messaging and link
//     authentication (Supermicro refuses messaging on a user without a privilege);
//  4. Enable User, and last Test Password: the account is read back as working.
//
// A step that fails leaves the slot disabled and nameless again, as far as the BMC lets.
// The password must be 1 to MaxPasswordLen bytes; bmc.NewPassword makes one every BMC's
// policy accepts (bmc.CheckPassword lists them).
func (d *Driver) AddUser(ctx context.Context, username, password string, priv Privilege) (uint8, error) {
	if username == "" || len(username) > 16 || freeSlot(username) {
		return 0, d.opErr("add-user", bmc.ErrInvalid, "a user name of 1 to 16 bytes is required", nil)
	}
	if password == "" || len(password) > MaxPasswordLen {
		return 0, d.opErr("add-user", bmc.ErrInvalid, "a password of 1 to 20 bytes is required", nil)
	}
	if priv < PrivilegeUser || priv > PrivilegeAdmin {
		return 0, d.opErr("add-user", bmc.ErrInvalid, "the privilege must be user, operator or administrator", nil)
	}
	var id uint8
	err := d.call(ctx, "add-user", func(c *client.Client) error {
		acc, maxID, err := userSlots(ctx, c)
		if err != nil {
			return err
		}
		first := max(2, int(acc.FixedNameUseIDsCount)+1)
		for n := first; n <= maxID && id == 0; n++ {
			u, err := c.GetUsername(ctx, uint8(n))
			if err != nil {
				continue // unused ids answer an error on some BMCs
			}
			if u.Username == username {
				return d.opErr("add-user", bmc.ErrInvalid, "the BMC already has a user named "+username+
					" (id "+strconv.Itoa(n)+"): rotate its password instead", nil)
			}
			if freeSlot(u.Username) {
				id = uint8(n)
			}
		}
		if id == 0 {
			return d.opErr("add-user", bmc.ErrUnsupported, "the BMC has no free user slot", nil)
		}
		return d.setUp(ctx, c, id, username, password, priv)
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// setUp runs the steps of AddUser on slot id, undoing what it can when one fails.
func (d *Driver) setUp(ctx context.Context, c *client.Client, id uint8, username, password string, priv Privilege) error {
	long := len(password) > 16
	access := func(messaging bool) error {
		_, err := c.SetUserAccess(ctx, &app.SetUserAccessRequest{
			EnableChanging:      true,
			EnableLinkAuth:      messaging,
			EnableIPMIMessaging: messaging,
			ChannelNumber:       types.ChannelNumberSelf,
			UserID:              id,
			MaxPrivLevel:        uint8(priv),
		})
		return err
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"set-name", func() error { _, err := c.SetUsername(ctx, id, username); return err }},
		{"set-password", func() error { _, err := c.SetUserPassword(ctx, id, password, long); return err }},
		{"set-privilege", func() error { return access(false) }},
		{"enable-messaging", func() error { return access(true) }},
		{"enable-user", func() error { return c.EnableUser(ctx, id) }},
		{"test-password", func() error { _, err := c.TestUserPassword(ctx, id, password, long); return err }},
	}
	for _, s := range steps {
		if d.userStep != nil {
			d.userStep(s.name)
		}
		if err := s.do(); err != nil {
			_ = c.DisableUser(ctx, id)
			_, _ = c.SetUsername(ctx, id, "")
			e := d.classify("add-user", err, false)
			var oe *bmc.OpError
			if errors.As(e, &oe) {
				oe.Message = "user " + strconv.Itoa(int(id)) + ": " + s.name + " failed; the slot was disabled and its name cleared: " + oe.Message
			}
			return e
		}
	}
	return nil
}

// userSlots reads the channel's user access: the highest user id the BMC has (63 where it
// reports none or more than IPMI allows), and the rest of what it says.
func userSlots(ctx context.Context, c *client.Client) (*app.GetUserAccessResponse, int, error) {
	acc, err := c.GetUserAccess(ctx, types.ChannelNumberSelf, 1)
	if err != nil {
		return nil, 0, err
	}
	maxID := int(acc.MaxUsersIDCount)
	if maxID == 0 || maxID > 63 {
		maxID = 63
	}
	return acc, maxID, nil
}
