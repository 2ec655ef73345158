package redfish

import (
	"context"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
)

type rfStatus struct {
	State  string
	Health string
}

// Storage implements bmc.StorageLister: the drives of every Storage subsystem, or, where
// the BMC has none, the devices of its SimpleStorage controllers. Absent devices are left
// out.
func (d *Driver) Storage(ctx context.Context) ([]bmc.Disk, error) {
	var disks []bmc.Disk
	err := d.do(ctx, "storage", func(c *gofish.APIClient) error {
		disks = nil
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
				return err
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
					return err
				}
				if drive.Status.State == "Absent" {
					continue
				}
				disks = append(disks, bmc.Disk{Name: drive.Name, Model: drive.Model, Serial: drive.SerialNumber,
					CapacityBytes: deref(drive.CapacityBytes), Controller: st.ID, Health: drive.Status.Health})
			}
		}
		if len(subsystems) > 0 {
			return nil
		}
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
				return err
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
	return disks, err
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
