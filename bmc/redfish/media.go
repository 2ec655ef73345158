package redfish

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// cdDrive finds the first virtual media device that takes a CD or DVD: the system's, or
// else the first manager's (where some BMCs keep them).
func (d *Driver) cdDrive(c *gofish.APIClient) (*schemas.VirtualMedia, error) {
	b := newBudget()
	var sys struct {
		VirtualMedia odataID
		Links        struct{ ManagedBy []odataID }
	}
	if _, err := b.get(c, d.sysPath, &sys); err != nil {
		return nil, err
	}
	colls := []string{sys.VirtualMedia.ID}
	if len(sys.Links.ManagedBy) > 0 {
		var mgr struct{ VirtualMedia odataID }
		if _, err := b.get(c, sys.Links.ManagedBy[0].ID, &mgr); err == nil {
			colls = append(colls, mgr.VirtualMedia.ID)
		}
	}
	for _, coll := range colls {
		ids, err := b.members(c, coll)
		if err != nil {
			if isStatus(err, 404) {
				continue
			}
			return nil, err
		}
		for _, id := range ids {
			var vm struct{ MediaTypes []string }
			if _, err := b.get(c, id, &vm); err != nil {
				return nil, err
			}
			if slices.Contains(vm.MediaTypes, "CD") || slices.Contains(vm.MediaTypes, "DVD") {
				return schemas.GetVirtualMedia(c, id)
			}
		}
	}
	return nil, d.opErr("virtual-media", bmc.ErrUnsupported, "the BMC lists no virtual CD/DVD drive", nil)
}

func inserted(vm *schemas.VirtualMedia) bool {
	return vm.Inserted != nil && *vm.Inserted && vm.Image != ""
}

// InsertMedia implements bmc.VirtualMediaController with the InsertMedia action, or a
// PATCH of the VirtualMedia resource where the BMC offers no action. The drive is read
// back afterwards: an insert the BMC accepted but did not carry out is ErrRefused.
func (d *Driver) InsertMedia(ctx context.Context, image string) error {
	u, err := url.Parse(image)
	if err != nil || u.Host == "" || !slices.Contains([]string{"http", "https", "nfs", "cifs", "smb"}, strings.ToLower(u.Scheme)) {
		return d.opErr("insert-media", bmc.ErrInvalid, "the image must be an http, https, nfs or cifs URL", nil)
	}
	return d.do(ctx, "insert-media", func(c *gofish.APIClient) error {
		vm, err := d.cdDrive(c)
		if err != nil {
			return err
		}
		if inserted(vm) {
			if vm.Image == image {
				return nil
			}
			if _, err := vm.EjectMedia(); err != nil {
				return err
			}
			if vm, err = schemas.GetVirtualMedia(c, vm.ODataID); err != nil {
				return err
			}
		}
		proto := schemas.TransferProtocolType(strings.ToUpper(u.Scheme))
		if proto == "SMB" {
			proto = "CIFS"
		}
		yes := true
		params := &schemas.VirtualMediaInsertMediaParameters{Image: image, Inserted: &yes, WriteProtected: &yes,
			TransferProtocolType: &proto}
		if !vm.SupportsMediaInsert {
			d.log.Info("redfish: no InsertMedia action, patching the VirtualMedia resource", "addr", d.endpoint, "drive", vm.ID)
		}
		if _, err := vm.InsertMedia(params); err != nil {
			return err
		}
		after, err := schemas.GetVirtualMedia(c, vm.ODataID)
		if err != nil {
			return err
		}
		if !inserted(after) || after.Image != image {
			return d.opErr("insert-media", bmc.ErrRefused, "the BMC accepted the insert but the drive shows "+quoteImage(after.Image), nil)
		}
		return nil
	})
}

func quoteImage(s string) string {
	if s == "" {
		return "no image"
	}
	if len(s) > 128 {
		s = s[:128] + "..."
	}
	return `"` + s + `"`
}

// EjectMedia implements bmc.VirtualMediaController.
func (d *Driver) EjectMedia(ctx context.Context) error {
	return d.do(ctx, "eject-media", func(c *gofish.APIClient) error {
		vm, err := d.cdDrive(c)
		if err != nil {
			return err
		}
		if !inserted(vm) {
			return nil
		}
		if !vm.SupportsMediaEject {
			d.log.Info("redfish: no EjectMedia action, patching the VirtualMedia resource", "addr", d.endpoint, "drive", vm.ID)
		}
		_, err = vm.EjectMedia()
		return err
	})
}
