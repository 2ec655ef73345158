package redfish

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

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
	// Settings is DSP0266's @Redfish.Settings: where the system refuses its Boot as
	// read-only, the override goes to this settings object (iDRAC10's Settings, an AMI
	// BMC's FutureState /SD), and the system's own Boot shows the override in force, not
	// the pending one.
	Settings struct {
		Object struct {
			ID string `json:"@odata.id"`
		} `json:"SettingsObject"`
	} `json:"@Redfish.Settings"`
	Boot struct {
		Target         string   `json:"BootSourceOverrideTarget"`
		Enabled        string   `json:"BootSourceOverrideEnabled"`
		Mode           string   `json:"BootSourceOverrideMode"`
		AllowedTargets []string `json:"BootSourceOverrideTarget@Redfish.AllowableValues"`
		AllowedEnabled []string `json:"BootSourceOverrideEnabled@Redfish.AllowableValues"`
		AllowedModes   []string `json:"BootSourceOverrideMode@Redfish.AllowableValues"`
	}
}

// SetBootDevice implements bmc.BootController with a PATCH of the system's Boot object,
// read back afterwards: a BMC that accepted the PATCH but kept another target,
// persistence or mode (sushy-emulator stores Once as Continuous) is an ErrDiffers error
// naming what it kept; one that answered 200 with an error body (iDRAC) is ErrRefused.
//
// What the BMC lists decides before anything is written: a mode missing from
// BootSourceOverrideMode@Redfish.AllowableValues, a target or persistence missing from
// theirs, is ErrUnsupported with nothing sent.
//
// BootSourceOverrideMode is sent (the requested mode, or the system's current one for
// BootModeAuto) because some BMCs (Supermicro) require it. A BMC that rejects it (HPE
// iLO, OpenBMC on GB200) is remembered and gets Target and Enabled only, from then on; an
// explicit mode is then ErrUnsupported, nothing changed, unless the BMC reports that it is
// already in that mode. A BMC that demands it when it was not sent gets it again with
// UEFI. UEFI HTTP (or any target) the BMC lists only in the other mode is preceded by a
// PATCH of the mode alone, so that the allowed targets are checked in the mode the boot
// will use; if the target is still not offered, or the override is then refused, the
// mode the system had is put back. A persistence the BMC rejects (Lenovo XCC refuses
// Continuous) is ErrUnsupported.
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
		enabled := "Once"
		switch {
		case b.Target == bmc.BootNone:
			enabled = "Disabled"
		case b.Persistent:
			enabled = "Continuous"
		}
		explicit := b.Mode != bmc.BootModeAuto
		want := "" // the mode the caller asked for, explicitly or through UEFI HTTP
		switch b.Mode {
		case bmc.BootModeUEFI:
			want = "UEFI"
		case bmc.BootModeLegacy:
			want = "Legacy"
		}
		if b.Target == bmc.BootHTTP {
			want = "UEFI"
		}
		// wp is where the override is written and read back: the system, or, once the
		// system refused its Boot as read-only, the settings object its @Redfish.Settings
		// names (iDRAC10: bmclib #461; AMI's FutureState: Redfish-Tacklebox #144).
		wp := d.sysPath
		so := sys.Settings.Object.ID
		if so == d.sysPath || !validPath(so) {
			so = ""
		}
		toSettings := func() error {
			wp = so
			d.log.Info("redfish: writing the boot override to the settings object", "addr", d.endpoint, "path", so)
			var pending systemBoot
			etag, err = getRaw(c, wp, &pending)
			return err
		}
		if so != "" && d.knows().bootSettings {
			if err := toSettings(); err != nil {
				return err
			}
		}
		if target == "Cd" && len(sys.Boot.AllowedTargets) > 0 && !slices.Contains(sys.Boot.AllowedTargets, "Cd") &&
			slices.Contains(sys.Boot.AllowedTargets, "UsbCd") {
			// Supermicro boots its virtual CD as UsbCd and does not list Cd (sushy's notes).
			target = "UsbCd"
		}
		prior := sys.Boot.Mode
		q := d.knows()
		listed := func(al []string, v string) bool { return len(al) == 0 || slices.Contains(al, v) }
		// Decided from what the BMC lists, before anything is written.
		if want != "" && prior != want && !listed(sys.Boot.AllowedModes, want) {
			return d.opErr("set-boot", bmc.ErrUnsupported, "the BMC does not offer BootSourceOverrideMode "+want+
				" (it lists "+strings.Join(sys.Boot.AllowedModes, ", ")+")", nil)
		}
		if want != "" && q.noBootMode && prior != want && (explicit || prior != "") {
			return d.opErr("set-boot", bmc.ErrUnsupported, noModeMessage(prior, want), nil)
		}
		if !listed(sys.Boot.AllowedEnabled, enabled) || (enabled == "Continuous" && q.noContinuous) {
			return d.opErr("set-boot", bmc.ErrUnsupported, "the BMC does not offer BootSourceOverrideEnabled "+enabled, nil)
		}
		switchMode := want != "" && !q.noBootMode && prior != "" && prior != want && !listed(sys.Boot.AllowedTargets, target)
		if !switchMode && !listed(sys.Boot.AllowedTargets, target) {
			return d.opErr("set-boot", bmc.ErrUnsupported, "the BMC does not offer boot target "+target, nil)
		}
		// restore puts back the mode the system had, after a switch, and says so in err.
		switched := false
		restore := func(err error) error {
			if !switched {
				return err
			}
			d.log.Info("redfish: putting the boot mode back", "addr", d.endpoint, "mode", prior)
			var now systemBoot
			tag, gerr := getRaw(c, wp, &now)
			if gerr == nil && now.Boot.Mode != prior {
				_, gerr = d.patch(c, wp, tag, map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": prior}})
			}
			var oe *bmc.OpError
			if errors.As(err, &oe) {
				if gerr != nil {
					oe.Message += "; the boot mode could not be put back to " + prior + ": " + d.classify("set-boot", gerr).Error()
				} else {
					oe.Message += "; the boot mode was put back to " + prior
				}
			}
			return err
		}
		if switchMode {
			d.log.Info("redfish: switching the boot mode before choosing a target it lists",
				"addr", d.endpoint, "mode", want, "target", target)
			_, err := d.patch(c, wp, etag, map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": want}})
			if isStatus(err, 400) && mentions(err, "BootSourceOverrideMode") {
				d.learn("BootSourceOverrideMode refused", func(l *learned) { l.noBootMode = true })
				e := d.classify("set-boot", err).(*bmc.OpError)
				e.Kind = bmc.ErrUnsupported
				e.Message = noModeMessage(prior, want) + ": " + e.Message
				return e
			}
			if err != nil {
				return err
			}
			if etag, err = getRaw(c, wp, &sys); err != nil {
				return err
			}
			if sys.Boot.Mode != want {
				return d.opErr("set-boot", bmc.ErrRefused, "the BMC accepted BootSourceOverrideMode "+want+
					" but kept "+orNone(sys.Boot.Mode), nil)
			}
			switched = true
			if !listed(sys.Boot.AllowedTargets, target) {
				return restore(d.opErr("set-boot", bmc.ErrUnsupported, "the BMC does not offer boot target "+target+
					" in either mode", nil))
			}
			if !listed(sys.Boot.AllowedEnabled, enabled) {
				return restore(d.opErr("set-boot", bmc.ErrUnsupported, "the BMC does not offer BootSourceOverrideEnabled "+enabled, nil))
			}
		}
		mode := want
		if mode == "" {
			mode = sys.Boot.Mode
		}
		if mode == "" && q.needsBootMode {
			mode = "UEFI"
		}
		if q.noBootMode {
			mode = ""
		}
		body := func(mode string) map[string]any {
			boot := map[string]any{"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": enabled}
			if mode != "" {
				boot["BootSourceOverrideMode"] = mode
			}
			return map[string]any{"Boot": boot}
		}
		ans, err := d.patch(c, wp, etag, body(mode))
		if so != "" && wp != so && readOnly(err) && !mentions(err, "BootSourceOverrideMode") {
			d.learn("Boot read-only: writing the settings object", func(l *learned) { l.bootSettings = true })
			if err := toSettings(); err != nil {
				return restore(err)
			}
			ans, err = d.patch(c, wp, etag, body(mode))
		}
		switch {
		case err == nil:
		case isStatus(err, 400) && enabled == "Continuous" && mentions(err, "Continuous"):
			d.learn("Continuous boot override refused", func(l *learned) { l.noContinuous = true })
			e := d.classify("set-boot", err).(*bmc.OpError)
			e.Kind = bmc.ErrUnsupported
			e.Message = "the BMC refuses a persistent boot override (set it once before each boot): " + e.Message
			return restore(e)
		case isStatus(err, 400) && mode != "" && mentions(err, "BootSourceOverrideMode"):
			d.learn("BootSourceOverrideMode refused", func(l *learned) { l.noBootMode = true })
			if want != "" && sys.Boot.Mode != want && (explicit || sys.Boot.Mode != "") {
				// The explicit mode cannot be had: never dropped silently.
				e := d.classify("set-boot", err).(*bmc.OpError)
				e.Kind = bmc.ErrUnsupported
				e.Message = noModeMessage(sys.Boot.Mode, want) + ": " + e.Message
				return restore(e)
			}
			ans, err = d.patch(c, wp, etag, body(""))
		case isStatus(err, 400) && mode == "" && mentions(err, "BootSourceOverrideMode"):
			d.learn("BootSourceOverrideMode required", func(l *learned) { l.needsBootMode = true })
			ans, err = d.patch(c, wp, etag, body("UEFI"))
		}
		if err != nil {
			return restore(d.classify("set-boot", err))
		}
		if err := d.checkBoot(c, wp, target, enabled, want, ans); err != nil {
			return err
		}
		return d.settled(ctx, c, wp, target, enabled)
	})
}

// settled reads the override again after Config.SettleTime: a BMC that took the write
// and dropped it since (a Supermicro AMI BMC answered 200 and forgot the override a few
// seconds later: bmclib #459) is an ErrDiffers error that says it reverted.
func (d *Driver) settled(ctx context.Context, c *gofish.APIClient, wp, target, enabled string) error {
	wait := d.cfg.SettleTime
	if wait == 0 {
		wait = DefaultSettleTime
	}
	if wait < 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	var after systemBoot
	if _, err := getRaw(c, wp, &after); err != nil {
		return err
	}
	if after.Boot.Enabled == enabled && (enabled == "Disabled" || after.Boot.Target == target) {
		return nil
	}
	return d.opErr("set-boot", bmc.ErrDiffers, "the BMC accepted the boot override and reverted it within "+
		wait.String()+": it now has BootSourceOverrideEnabled "+orNone(after.Boot.Enabled)+", BootSourceOverrideTarget "+
		orNone(after.Boot.Target)+" (asked "+enabled+" "+target+")", nil)
}

// readOnly says whether err refuses a PATCH as writing a read-only property (iDRAC10's
// Boot) or the resource as not writable at all.
func readOnly(err error) bool {
	return isStatus(err, 405) || (isStatus(err, 400) && mentions(err, "PropertyNotWritable", "read only", "read-only", "ReadOnly"))
}

// noModeMessage says why an explicit mode cannot be had from a BMC that refuses
// BootSourceOverrideMode, in the mode it reports (cur, possibly none).
func noModeMessage(cur, want string) string {
	if cur == "" {
		return "the BMC refuses BootSourceOverrideMode and does not report its mode; " + want + " was asked for"
	}
	return "the BMC refuses BootSourceOverrideMode and is in " + cur + " mode; " + want + " was asked for"
}

// checkBoot reads the override back and names what the BMC kept that was not asked for:
// an ErrDiffers error (the BMC took the write and keeps something else; sending it again
// changes nothing).
func (d *Driver) checkBoot(c *gofish.APIClient, wp, target, enabled, mode string, ans answer) error {
	var after systemBoot
	if _, err := getRaw(c, wp, &after); err != nil {
		return err
	}
	var kept []string
	if after.Boot.Enabled != enabled {
		kept = append(kept, "BootSourceOverrideEnabled "+orNone(after.Boot.Enabled)+" (asked "+enabled+")")
	}
	if enabled != "Disabled" && after.Boot.Target != target {
		kept = append(kept, "BootSourceOverrideTarget "+orNone(after.Boot.Target)+" (asked "+target+")")
	}
	if mode != "" && after.Boot.Mode != "" && after.Boot.Mode != mode { // a BMC that reports no mode cannot be checked
		kept = append(kept, "BootSourceOverrideMode "+orNone(after.Boot.Mode)+" (asked "+mode+")")
	}
	if len(kept) == 0 {
		return nil
	}
	msg := "the BMC accepted the boot override but kept " + strings.Join(kept, ", ")
	if len(ans.notes) > 0 {
		msg += "; it said: " + strings.Join(ans.notes, "; ")
	}
	return d.opErr("set-boot", bmc.ErrDiffers, msg, nil)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
