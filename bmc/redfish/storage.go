package redfish

import (
	"context"
	"strings"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
)

type rfStatus struct {
	State  string
	Health string
}

// Storage implements bmc.StorageLister: the drives of every Storage subsystem, or, where
// the BMC has none, the devices of its SimpleStorage controllers. Absent devices are left
// out; strings are trimmed of padding. A subsystem or drive that cannot be read leaves the
// others listed, and the error is a *bmc.PartialError naming each one that failed.
func (d *Driver) Storage(ctx context.Context) ([]bmc.Disk, error) {
	var disks []bmc.Disk
	var parts []bmc.PartError
	fail := func(part string, err error) {
		parts = append(parts, bmc.PartError{Part: part, Err: d.classify("storage", err)})
	}
	err := d.do(ctx, "storage", func(c *gofish.APIClient) error {
		disks, parts = nil, nil
		b := newBudget()
		var sys rfSystem
		if _, err := b.get(c, d.sysPath, &sys); err != nil {
			return err
		}
		subsystems, err := b.members(c, sys.Storage.ID)
		if err != nil && !isStatus(err, 404) {
			return err
		}
		for _, sp := range subsystems {
			var st struct {
				ID     string `json:"Id"`
				Drives []odataID
			}
			if _, err := b.get(c, sp, &st); err != nil {
				fail("storage "+sp, err)
				continue
			}
			for i, dr := range st.Drives {
				if i >= maxMembers {
					break
				}
				var drive struct {
					Name, Model, SerialNumber string
					CapacityBytes             *int64
					Status                    rfStatus
				}
				if _, err := b.get(c, dr.ID, &drive); err != nil {
					fail("drive "+dr.ID, err)
					continue
				}
				if drive.Status.State == "Absent" {
					continue
				}
				disks = append(disks, bmc.Disk{Name: strings.TrimSpace(drive.Name), Model: clean(drive.Model), Serial: clean(drive.SerialNumber),
					CapacityBytes: deref(drive.CapacityBytes), Controller: st.ID, Health: drive.Status.Health})
			}
		}
		if len(subsystems) > 0 {
			return nil
		}
		parts = nil
		simple, err := b.members(c, sys.SimpleStorage.ID)
		if err != nil && !isStatus(err, 404) {
			return err
		}
		for _, sp := range simple {
			var ss struct {
				ID      string `json:"Id"`
				Devices []struct {
					Name, Model   string
					CapacityBytes *int64
					Status        rfStatus
				}
			}
			if _, err := b.get(c, sp, &ss); err != nil {
				fail("simple-storage "+sp, err)
				continue
			}
			for _, dev := range ss.Devices {
				if dev.Status.State == "Absent" {
					continue
				}
				disks = append(disks, bmc.Disk{Name: dev.Name, Model: dev.Model, CapacityBytes: deref(dev.CapacityBytes),
					Controller: ss.ID, Health: dev.Status.Health})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(parts) > 0 {
		return disks, &bmc.PartialError{Driver: Name, Op: "storage", Addr: d.target.Address, Parts: parts}
	}
	return disks, nil
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
