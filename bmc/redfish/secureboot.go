package redfish

import (
	"context"
	"strconv"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
)

var _ bmc.SecureBootController = (*Driver)(nil)

type rfSecureBoot struct {
	SecureBootEnable      *bool
	SecureBootCurrentBoot string
	SecureBootMode        string
}

// secureBootPath returns the path of the system's SecureBoot resource.
func (d *Driver) secureBootPath(c *gofish.APIClient, op string) (string, error) {
	var sys struct{ SecureBoot odataID }
	if _, err := getRaw(c, d.sysPath, &sys); err != nil {
		return "", err
	}
	if sys.SecureBoot.ID == "" {
		return "", d.opErr(op, bmc.ErrUnsupported, "the system has no SecureBoot resource", nil)
	}
	return sys.SecureBoot.ID, nil
}

func (d *Driver) readSecureBoot(c *gofish.APIClient, op string) (string, rfSecureBoot, string, error) {
	var sb rfSecureBoot
	p, err := d.secureBootPath(c, op)
	if err != nil {
		return "", sb, "", err
	}
	etag, err := getRaw(c, p, &sb)
	if err != nil {
		return "", sb, "", err
	}
	if sb.SecureBootEnable == nil {
		return "", sb, "", d.opErr(op, bmc.ErrUnsupported, "the SecureBoot resource has no SecureBootEnable", nil)
	}
	return p, sb, etag, nil
}

// SecureBoot implements bmc.SecureBootController.
func (d *Driver) SecureBoot(ctx context.Context) (bmc.SecureBootState, error) {
	var st bmc.SecureBootState
	err := d.do(ctx, "secure-boot", func(c *gofish.APIClient) error {
		_, sb, _, err := d.readSecureBoot(c, "secure-boot")
		if err != nil {
			return err
		}
		st = bmc.SecureBootState{Enabled: *sb.SecureBootEnable, CurrentBoot: sb.SecureBootCurrentBoot, Mode: sb.SecureBootMode}
		return nil
	})
	return st, err
}

// SetSecureBoot implements bmc.SecureBootController: a PATCH of SecureBootEnable (with
// the resource's ETag), then a read-back. Setting the value it holds sends nothing.
func (d *Driver) SetSecureBoot(ctx context.Context, enable bool) error {
	const op = "set-secure-boot"
	return d.do(ctx, op, func(c *gofish.APIClient) error {
		p, sb, etag, err := d.readSecureBoot(c, op)
		if err != nil || *sb.SecureBootEnable == enable {
			return err
		}
		if _, err := d.patch(c, p, etag, map[string]any{"SecureBootEnable": enable}); err != nil {
			return err
		}
		var after rfSecureBoot
		if _, err := getRaw(c, p, &after); err != nil {
			return err
		}
		if after.SecureBootEnable == nil || *after.SecureBootEnable != enable {
			got := "nothing"
			if after.SecureBootEnable != nil {
				got = strconv.FormatBool(*after.SecureBootEnable)
			}
			return d.opErr(op, bmc.ErrDiffers, "the BMC accepted SecureBootEnable "+strconv.FormatBool(enable)+
				" but reads "+got, nil)
		}
		return nil
	})
}
