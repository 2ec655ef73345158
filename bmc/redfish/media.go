package redfish

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
)

// rfMedia is the part of a VirtualMedia resource the driver reads.
type rfMedia struct {
	ID         string `json:"Id"`
	ODataID    string `json:"@odata.id"`
	MediaTypes []string
	Image      string
	Inserted   *bool
	Actions    struct {
		Insert *struct {
			Target string `json:"target"`
		} `json:"#VirtualMedia.InsertMedia"`
		Eject *struct {
			Target string `json:"target"`
		} `json:"#VirtualMedia.EjectMedia"`
	}
}

func (m rfMedia) inserted() bool { return m.Inserted != nil && *m.Inserted && m.Image != "" }

// cdDrive finds the first virtual media device that takes a CD or DVD: the system's, or
// else the first manager's (where some BMCs keep them), the lowest-numbered slot first
// ([slotOrder]). It returns the drive and its ETag.
func (d *Driver) cdDrive(c *gofish.APIClient) (rfMedia, string, error) {
	b := newBudget()
	var sys struct {
		VirtualMedia odataID
		Links        struct{ ManagedBy []odataID }
	}
	if _, err := b.get(c, d.sysPath, &sys); err != nil {
		return rfMedia{}, "", err
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
			return rfMedia{}, "", err
		}
		for _, id := range slotOrder(ids) {
			var vm rfMedia
			etag, err := b.get(c, id, &vm)
			if err != nil {
				return rfMedia{}, "", err
			}
			if slices.Contains(vm.MediaTypes, "CD") || slices.Contains(vm.MediaTypes, "DVD") {
				if vm.ODataID == "" {
					vm.ODataID = id
				}
				return vm, etag, nil
			}
		}
	}
	return rfMedia{}, "", d.opErr("virtual-media", bmc.ErrUnsupported, "the BMC lists no virtual CD/DVD drive", nil)
}

// slotOrder orders a VirtualMedia collection's members by the number their last path
// element ends in (".../VirtualMedia/1" before ".../2", CD1 before CD2), members without
// one after those, in the order listed. iDRAC10 lists its slot 2 before slot 1, both
// taking CDs, and boots an image only from slot 1 (dell/iDRAC-Redfish-Scripting #324;
// dell/terraform-provider-redfish #329: an ISO in slot 2 never boots).
func slotOrder(ids []string) []string {
	num := func(id string) int {
		e := id[strings.LastIndexByte(id, '/')+1:]
		i := len(e)
		for i > 0 && e[i-1] >= '0' && e[i-1] <= '9' {
			i--
		}
		n, err := strconv.Atoi(e[i:])
		if i == len(e) || err != nil {
			return math.MaxInt
		}
		return n
	}
	out := slices.Clone(ids)
	slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(num(a), num(b)) })
	return out
}

// readDrive reads the drive at p again.
func (d *Driver) readDrive(c *gofish.APIClient, p string) (rfMedia, string, error) {
	var vm rfMedia
	etag, err := getRaw(c, p, &vm)
	if vm.ODataID == "" {
		vm.ODataID = p
	}
	return vm, etag, err
}

// insert attaches image by the InsertMedia action, or by a PATCH where the drive has no
// action (learned for the BMC the first time).
func (d *Driver) insert(c *gofish.APIClient, vm rfMedia, etag, image, proto string) error {
	if vm.Actions.Insert == nil || d.knows().mediaByPatch {
		if !d.knows().mediaByPatch {
			d.learn("no VirtualMedia actions: patching the resource", func(l *learned) { l.mediaByPatch = true })
		}
		_, err := d.patch(c, vm.ODataID, etag, map[string]any{"Image": image, "Inserted": true,
			"WriteProtected": true, "TransferProtocolType": proto})
		return err
	}
	_, err := d.action(c, vm.Actions.Insert.Target, etag, map[string]any{"Image": image, "Inserted": true,
		"WriteProtected": true, "TransferProtocolType": proto})
	if isStatus(err, http.StatusMethodNotAllowed) {
		// A drive that lists InsertMedia and answers it 405: PATCHed instead (sushy's notes).
		d.learn("no VirtualMedia actions: patching the resource", func(l *learned) { l.mediaByPatch = true })
		return d.insert(c, vm, etag, image, proto)
	}
	return err
}

func (d *Driver) eject(c *gofish.APIClient, vm rfMedia, etag string) error {
	if vm.Actions.Eject == nil || d.knows().mediaByPatch {
		if !d.knows().mediaByPatch {
			d.learn("no VirtualMedia actions: patching the resource", func(l *learned) { l.mediaByPatch = true })
		}
		_, err := d.patch(c, vm.ODataID, etag, map[string]any{"Image": nil, "Inserted": false})
		return err
	}
	// An empty object, not an empty body: iLO refuses the latter.
	_, err := d.action(c, vm.Actions.Eject.Target, etag, map[string]any{})
	if isStatus(err, http.StatusMethodNotAllowed) {
		d.learn("no VirtualMedia actions: patching the resource", func(l *learned) { l.mediaByPatch = true })
		return d.eject(c, vm, etag)
	}
	return err
}

// InsertMedia implements bmc.VirtualMediaController with the InsertMedia action, or a
// PATCH of the VirtualMedia resource where the BMC offers no action. The drive is read
// back afterwards: an insert the BMC accepted but did not carry out is ErrRefused. After
// an insert the BMC failed, the drive is read back too, and when it claims the image
// anyway (sushy-emulator records it before it fails) it is ejected, so that no later
// call mistakes it for inserted; an image that failed once on this Open is inserted
// afresh even when the drive shows it. The image URL, and any image cache grant, is
// redacted from the error (as UpdateFirmware does).
func (d *Driver) InsertMedia(ctx context.Context, image string) error {
	u, err := url.Parse(image)
	if err != nil || u.Host == "" || !slices.Contains([]string{"http", "https", "nfs", "cifs", "smb"}, strings.ToLower(u.Scheme)) {
		return d.opErr("insert-media", bmc.ErrInvalid, "the image must be an http, https, nfs or cifs URL", nil)
	}
	proto := strings.ToUpper(u.Scheme)
	if proto == "SMB" {
		proto = "CIFS"
	}
	// The image URL may carry an image cache grant: what the error says of it is redacted.
	_, err = redactResult(redactor(image, u), bmc.FirmwareResult{}, d.insertMedia(ctx, image, proto))
	return err
}

func (d *Driver) insertMedia(ctx context.Context, image, proto string) error {
	return d.do(ctx, "insert-media", func(c *gofish.APIClient) error {
		vm, etag, err := d.cdDrive(c)
		if err != nil {
			return err
		}
		suspect := d.suspect(image, false)
		if vm.inserted() {
			if vm.Image == image && !suspect {
				return nil
			}
			if err := d.eject(c, vm, etag); err != nil {
				return err
			}
			if vm, etag, err = d.readDrive(c, vm.ODataID); err != nil {
				return err
			}
			if vm.inserted() {
				return d.opErr("insert-media", bmc.ErrRefused, "the BMC accepted the eject but the drive still shows "+
					quoteImage(vm.Image), nil)
			}
		}
		if ierr := d.insert(c, vm, etag, image, proto); ierr != nil {
			d.learn("insert failed: the drive is not trusted for this image", func(l *learned) {
				if l.suspectImages == nil {
					l.suspectImages = map[string]bool{}
				}
				l.suspectImages[image] = true
			})
			after, aetag, rerr := d.readDrive(c, vm.ODataID)
			e := d.classify("insert-media", ierr).(*bmc.OpError)
			if rerr == nil && after.inserted() {
				if d.eject(c, after, aetag) == nil {
					e.Message += "; the drive claimed " + quoteImage(after.Image) + " anyway and was ejected"
				} else {
					e.Message += "; the drive claims " + quoteImage(after.Image) + " anyway"
				}
			}
			return e
		}
		after, _, err := d.readDrive(c, vm.ODataID)
		if err != nil {
			return err
		}
		if !after.inserted() || after.Image != image {
			return d.opErr("insert-media", bmc.ErrRefused, "the BMC accepted the insert but the drive shows "+quoteImage(after.Image), nil)
		}
		if suspect {
			d.suspect(image, true)
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

// EjectMedia implements bmc.VirtualMediaController, and reads the drive back: a drive
// still showing an image is ErrRefused (any image cache grant in it redacted).
func (d *Driver) EjectMedia(ctx context.Context) error {
	_, err := redactResult(redactGrants, bmc.FirmwareResult{}, d.ejectMedia(ctx))
	return err
}

func (d *Driver) ejectMedia(ctx context.Context) error {
	return d.do(ctx, "eject-media", func(c *gofish.APIClient) error {
		vm, etag, err := d.cdDrive(c)
		if err != nil {
			return err
		}
		if !vm.inserted() {
			return nil
		}
		if err := d.eject(c, vm, etag); err != nil {
			return err
		}
		after, _, err := d.readDrive(c, vm.ODataID)
		if err != nil {
			return err
		}
		if after.inserted() {
			return d.opErr("eject-media", bmc.ErrRefused, "the BMC accepted the eject but the drive still shows "+quoteImage(after.Image), nil)
		}
		return nil
	})
}
