package redfish

import (
	"context"
	"slices"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
)

var bootTargets = map[bmc.BootTarget]string{
	bmc.BootNone:      "None",
	bmc.BootPXE:       "Pxe",
	bmc.BootHTTP:      "UefiHttp",
	bmc.BootCD:        "Cd",
	bmc.BootDisk:      "Hdd",
	bmc.BootBIOSSetup: "BiosSetup",
}

// systemBoot is the part of a ComputerSystem a boot override reads.
type systemBoot struct {
	Boot struct {
		Target         string   `json:"BootSourceOverrideTarget"`
		Enabled        string   `json:"BootSourceOverrideEnabled"`
		Mode           string   `json:"BootSourceOverrideMode"`
		AllowedTargets []string `json:"BootSourceOverrideTarget@Redfish.AllowableValues"`
		AllowedEnabled []string `json:"BootSourceOverrideEnabled@Redfish.AllowableValues"`
		AllowedModes   []string `json:"BootSourceOverrideMode@Redfish.AllowableValues"`
	}
}

// SetBootDevice implements bmc.BootController with a PATCH of the system's Boot object.
//
// BootSourceOverrideMode is sent (the requested mode, or the system's current one for
// BootModeAuto) because some BMCs (Supermicro) require it; a BMC that rejects it (HPE iLO)
// gets the PATCH again with only Target and Enabled, and one that demands it when it was
// not sent gets it again with UEFI. A target or persistence the BMC does not list, or
// rejects (Lenovo XCC refuses Continuous), is ErrUnsupported.
func (d *Driver) SetBootDevice(ctx context.Context, b bmc.BootDevice) error {
	if err := b.Validate(); err != nil {
		oe := err.(*bmc.OpError)
		oe.Driver, oe.Addr = Name, d.target.Address
		return oe
	}
	return d.do(ctx, "set-boot", func(c *gofish.APIClient) error {
		var sys systemBoot
		etag, err := getRaw(c, d.sysPath, &sys)
		if err != nil {
			return err
		}
		target := bootTargets[b.Target]
		if al := sys.Boot.AllowedTargets; len(al) > 0 && !slices.Contains(al, target) {
			return d.opErr("set-boot", bmc.ErrUnsupported, "the BMC does not offer boot target "+target, nil)
		}
		enabled := "Once"
		switch {
		case b.Target == bmc.BootNone:
			enabled = "Disabled"
		case b.Persistent:
			enabled = "Continuous"
		}
		if al := sys.Boot.AllowedEnabled; len(al) > 0 && !slices.Contains(al, enabled) {
			return d.opErr("set-boot", bmc.ErrUnsupported, "the BMC does not offer BootSourceOverrideEnabled "+enabled, nil)
		}
		mode := sys.Boot.Mode
		switch b.Mode {
		case bmc.BootModeUEFI:
			mode = "UEFI"
		case bmc.BootModeLegacy:
			mode = "Legacy"
		}
		if b.Target == bmc.BootHTTP {
			mode = "UEFI"
		}
		body := func(mode string) map[string]any {
			boot := map[string]any{"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": enabled}
			if mode != "" {
				boot["BootSourceOverrideMode"] = mode
			}
			return map[string]any{"Boot": boot}
		}
		err = d.patch(c, d.sysPath, etag, body(mode))
		switch {
		case err == nil:
			return nil
		case isStatus(err, 400) && enabled == "Continuous" && mentions(err, "Continuous"):
			e := d.classify("set-boot", err).(*bmc.OpError)
			e.Kind = bmc.ErrUnsupported
			e.Message = "the BMC refuses a persistent boot override (set it once before each boot): " + e.Message
			return e
		case isStatus(err, 400) && mode != "" && mentions(err, "BootSourceOverrideMode"):
			d.log.Info("redfish: BMC rejected BootSourceOverrideMode, sending Target and Enabled only",
				"addr", d.endpoint, "mode", mode)
			return d.patch(c, d.sysPath, etag, body(""))
		case isStatus(err, 400) && mode == "" && mentions(err, "BootSourceOverrideMode"):
			d.log.Info("redfish: BMC requires BootSourceOverrideMode, sending UEFI", "addr", d.endpoint)
			return d.patch(c, d.sysPath, etag, body("UEFI"))
		}
		return err
	})
}
