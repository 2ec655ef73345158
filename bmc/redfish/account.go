package redfish

import (
	"context"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
)

// RotatePassword implements bmc.CredentialRotator: the account's ChangePassword action
// (with the driver's own password as SessionAccountPassword) where the BMC offers it, else
// a PATCH of the account's Password. When the account is the driver's own, the driver
// keeps using the new password (its session stays open; basic auth logs in again).
func (d *Driver) RotatePassword(ctx context.Context, username, newPassword string) error {
	if username == "" || newPassword == "" {
		return d.opErr("rotate-password", bmc.ErrInvalid, "username and new password are required", nil)
	}
	err := d.do(ctx, "rotate-password", func(c *gofish.APIClient) error {
		b := newBudget()
		var root struct{ AccountService odataID }
		if _, err := b.get(c, "/redfish/v1/", &root); err != nil {
			return err
		}
		if root.AccountService.ID == "" {
			return d.opErr("rotate-password", bmc.ErrUnsupported, "the BMC has no AccountService", nil)
		}
		var as struct{ Accounts odataID }
		if _, err := b.get(c, root.AccountService.ID, &as); err != nil {
			return err
		}
		ids, err := b.members(c, as.Accounts.ID)
		if err != nil {
			return err
		}
		for _, id := range ids {
			var acct struct {
				UserName string
				Actions  struct {
					ChangePassword *struct {
						Target string `json:"target"`
					} `json:"#ManagerAccount.ChangePassword"`
				}
			}
			etag, err := b.get(c, id, &acct)
			if err != nil {
				return err
			}
			if acct.UserName != username {
				continue
			}
			if cp := acct.Actions.ChangePassword; cp != nil && validPath(cp.Target) {
				d.mu.Lock()
				own := d.password
				d.mu.Unlock()
				resp, err := c.PostWithHeaders(cp.Target, map[string]string{
					"NewPassword": newPassword, "SessionAccountPassword": own}, nil)
				if err == nil {
					resp.Body.Close()
					return nil
				}
				if !isStatus(err, 404) && !isStatus(err, 405) && !isStatus(err, 501) {
					return err
				}
				d.log.Info("redfish: ChangePassword refused as unsupported, patching Password", "addr", d.endpoint)
			}
			_, err = d.patch(c, id, etag, map[string]string{"Password": newPassword})
			return err
		}
		return d.opErr("rotate-password", bmc.ErrInvalid, "the BMC has no account named "+username, nil)
	})
	if err != nil {
		return err
	}
	if username == d.target.Username {
		d.mu.Lock()
		d.password = newPassword
		d.mu.Unlock()
		if d.basic() {
			return d.login(ctx)
		}
	}
	return nil
}
