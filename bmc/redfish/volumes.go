package redfish

import (
	"context"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
)

// rfController is the part of a Storage resource the volume operations read.
type rfController struct {
	ID      string `json:"Id"`
	path    string
	Drives  []odataID
	Volumes odataID
}

// rfVolume is a Volume as read.
type rfVolume struct {
	ID            string `json:"Id"`
	Name          string
	RAIDType      string
	VolumeType    string // before Volume 1.3.1
	CapacityBytes *int64
	Links         struct{ Drives []odataID }
	Actions       struct {
		Initialize *struct {
			Target  string   `json:"target"`
			Allowed []string `json:"InitializeType@Redfish.AllowableValues"`
		} `json:"#Volume.Initialize"`
	}
}

// volumeTypes maps the VolumeType of older BMCs to a RAIDType where one is implied.
var volumeTypes = map[string]string{"NonRedundant": "RAID0", "Mirrored": "RAID1", "SpannedMirrors": "RAID10"}

func (v rfVolume) volume(controller string) bmc.Volume {
	out := bmc.Volume{Controller: controller, ID: v.ID, Name: clean(v.Name), RAIDType: v.RAIDType, CapacityBytes: deref(v.CapacityBytes)}
	if out.RAIDType == "" {
		out.RAIDType = volumeTypes[v.VolumeType]
	}
	for _, d := range v.Links.Drives {
		out.Drives = append(out.Drives, path.Base(d.ID))
	}
	return out
}

// controllers reads the system's storage controllers: the one named (by Id), or all
// when controller is "".
func (d *Driver) controllers(c *gofish.APIClient, b *budget, controller string) ([]rfController, error) {
	var sys rfSystem
	if _, err := b.get(c, d.sysPath, &sys); err != nil {
		return nil, err
	}
	paths, err := b.members(c, sys.Storage.ID)
	if err != nil && !isStatus(err, 404) {
		return nil, err
	}
	var out []rfController
	for _, p := range paths {
		var st rfController
		if _, err := b.get(c, p, &st); err != nil {
			return nil, err
		}
		st.path = p
		if controller == "" || st.ID == controller || path.Base(p) == controller {
			out = append(out, st)
		}
	}
	return out, nil
}

// controller returns the controller named, or the system's only one with volumes for "".
func (d *Driver) controller(c *gofish.APIClient, b *budget, op, controller string) (rfController, error) {
	all, err := d.controllers(c, b, controller)
	if err != nil {
		return rfController{}, err
	}
	all = slices.DeleteFunc(all, func(st rfController) bool { return st.Volumes.ID == "" })
	switch {
	case len(all) == 0 && controller == "":
		return rfController{}, d.opErr(op, bmc.ErrUnsupported, "the system has no storage controller with volumes", nil)
	case len(all) == 0:
		return rfController{}, d.opErr(op, bmc.ErrUnsupported, "no storage controller "+strconv.Quote(controller)+" with volumes", nil)
	case len(all) > 1:
		return rfController{}, d.opErr(op, bmc.ErrInvalid, "the system has "+strconv.Itoa(len(all))+" storage controllers: name one", nil)
	}
	return all[0], nil
}

// volumes reads st's volumes, with their paths.
func (d *Driver) volumes(c *gofish.APIClient, b *budget, st rfController) ([]rfVolume, []string, error) {
	paths, err := b.members(c, st.Volumes.ID)
	if err != nil {
		return nil, nil, err
	}
	vs := make([]rfVolume, 0, len(paths))
	for _, p := range paths {
		var v rfVolume
		if _, err := b.get(c, p, &v); err != nil {
			return nil, nil, err
		}
		if v.ID == "" {
			v.ID = path.Base(p)
		}
		vs = append(vs, v)
	}
	return vs, paths, nil
}

// Volumes implements bmc.StorageManager.
func (d *Driver) Volumes(ctx context.Context, controller string) ([]bmc.Volume, error) {
	var out []bmc.Volume
	err := d.do(ctx, "volumes", func(c *gofish.APIClient) error {
		out = nil
		b := newBudget()
		all, err := d.controllers(c, b, controller)
		if err != nil {
			return err
		}
		for _, st := range all {
			if st.Volumes.ID == "" {
				continue
			}
			vs, _, err := d.volumes(c, b, st)
			if err != nil {
				return err
			}
			for _, v := range vs {
				out = append(out, v.volume(st.ID))
			}
		}
		return nil
	})
	return out, err
}

// drivePath returns the path of st's drive id (its Id: the last element of its path).
func drivePath(st rfController, id string) (string, bool) {
	for _, dr := range st.Drives {
		if path.Base(dr.ID) == id || dr.ID == id {
			return dr.ID, true
		}
	}
	return "", false
}

// CreateVolume implements bmc.StorageManager: a POST of the volume (RAIDType, the drives'
// links, Name and CapacityBytes when given) to the controller's Volumes collection, then
// the new volume read back, from the answer's Location or, without one (or for a 202: a
// job), by listing the collection every PollInterval for at most TaskTimeout. A volume
// read back with another RAID type or other drives than asked, or a capacity more than 1%
// short of what was asked, is returned with an ErrDiffers error.
func (d *Driver) CreateVolume(ctx context.Context, spec bmc.VolumeSpec) (bmc.Volume, error) {
	const op = "create-volume"
	if err := spec.Validate(); err != nil {
		return bmc.Volume{}, d.opErr(op, bmc.ErrInvalid, err.Error(), nil)
	}
	var got bmc.Volume
	err := d.do(ctx, op, func(c *gofish.APIClient) error {
		b := newBudget()
		st, err := d.controller(c, b, op, spec.Controller)
		if err != nil {
			return err
		}
		var links []odataID
		for _, id := range spec.Drives {
			p, ok := drivePath(st, id)
			if !ok {
				return d.opErr(op, bmc.ErrInvalid, "controller "+strconv.Quote(st.ID)+" has no drive "+strconv.Quote(id), nil)
			}
			links = append(links, odataID{ID: p})
		}
		_, before, err := d.volumes(c, b, st)
		if err != nil {
			return err
		}
		body := map[string]any{"RAIDType": spec.RAIDType, "Links": map[string]any{"Drives": links}}
		if spec.Name != "" {
			body["Name"] = spec.Name
		}
		if spec.CapacityBytes > 0 {
			body["CapacityBytes"] = spec.CapacityBytes
		}
		a, err := d.action(c, st.Volumes.ID, "", body)
		if isStatus(err, 501) || isStatus(err, 405) {
			return d.opErr(op, bmc.ErrUnsupported, "the BMC does not create volumes on controller "+strconv.Quote(st.ID), d.classify(op, err))
		}
		if err != nil {
			return err
		}
		var v rfVolume
		if a.status == 201 && validPath(a.location) {
			if _, err := getRaw(c, a.location, &v); err != nil {
				return d.opErr(op, bmc.ErrOutcomeUnknown, "the BMC created the volume at "+a.location+" but it cannot be read", err)
			}
		} else if v, err = d.newVolume(ctx, c, st, before); err != nil {
			return err
		}
		if v.ID == "" {
			v.ID = path.Base(a.location)
		}
		got = v.volume(st.ID)
		return d.volumeDiffers(op, spec, got)
	})
	return got, err
}

// newVolume lists st's volumes until one not in before appears.
func (d *Driver) newVolume(ctx context.Context, c *gofish.APIClient, st rfController, before []string) (rfVolume, error) {
	deadline := time.Now().Add(d.cfg.TaskTimeout)
	for i := 0; ; i++ {
		b := newBudget()
		vs, paths, err := d.volumes(c, b, st)
		if err == nil {
			var fresh []rfVolume
			for i, p := range paths {
				if !slices.Contains(before, p) {
					fresh = append(fresh, vs[i])
				}
			}
			switch len(fresh) {
			case 1:
				return fresh[0], nil
			case 0:
			default:
				return rfVolume{}, d.opErr("create-volume", bmc.ErrOutcomeUnknown,
					strconv.Itoa(len(fresh))+" new volumes appeared: which is this one cannot be told", nil)
			}
		}
		if i >= maxPowerPolls || time.Now().After(deadline) {
			return rfVolume{}, d.opErr("create-volume", bmc.ErrOutcomeUnknown,
				"the BMC accepted the volume but does not list it after "+d.cfg.TaskTimeout.String(), err)
		}
		if err := sleepCtx(ctx, d.cfg.PollInterval); err != nil {
			return rfVolume{}, d.opErr("create-volume", bmc.ErrOutcomeUnknown, "the BMC accepted the volume; the deadline came before it was listed", err)
		}
	}
}

// volumeDiffers compares the volume read back with what was asked.
func (d *Driver) volumeDiffers(op string, spec bmc.VolumeSpec, got bmc.Volume) error {
	var kept []string
	if got.RAIDType != "" && got.RAIDType != spec.RAIDType {
		kept = append(kept, "RAIDType "+got.RAIDType+" (asked "+spec.RAIDType+")")
	}
	if len(got.Drives) > 0 {
		a, g := slices.Sorted(slices.Values(spec.Drives)), slices.Sorted(slices.Values(got.Drives))
		if !slices.Equal(a, g) {
			kept = append(kept, "drives "+strconv.Quote(joinIDs(g))+" (asked "+strconv.Quote(joinIDs(a))+")")
		}
	}
	if spec.CapacityBytes > 0 && got.CapacityBytes > 0 && got.CapacityBytes < spec.CapacityBytes-spec.CapacityBytes/100 {
		kept = append(kept, "CapacityBytes "+strconv.FormatInt(got.CapacityBytes, 10)+" (asked "+strconv.FormatInt(spec.CapacityBytes, 10)+")")
	}
	if len(kept) == 0 {
		return nil
	}
	msg := "the BMC created volume " + strconv.Quote(got.ID) + " and kept "
	for i, k := range kept {
		if i > 0 {
			msg += ", "
		}
		msg += k
	}
	return d.opErr(op, bmc.ErrDiffers, msg, nil)
}

func joinIDs(ids []string) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ","
		}
		s += id
	}
	return s
}

// findVolume returns the path and body of st's volume id.
func (d *Driver) findVolume(c *gofish.APIClient, b *budget, st rfController, id string) (string, rfVolume, bool, error) {
	vs, paths, err := d.volumes(c, b, st)
	if err != nil {
		return "", rfVolume{}, false, err
	}
	for i, v := range vs {
		if v.ID == id || path.Base(paths[i]) == id {
			return paths[i], v, true, nil
		}
	}
	return "", rfVolume{}, false, nil
}

// DeleteVolume implements bmc.StorageManager: a DELETE of the volume, confirmed by
// listing the controller's volumes (every PollInterval for at most TaskTimeout: a BMC may
// delete it in a job). A volume the controller does not list is ErrInvalid, nothing sent;
// one still listed at the end is ErrTimeout.
func (d *Driver) DeleteVolume(ctx context.Context, controller, id string) error {
	const op = "delete-volume"
	return d.do(ctx, op, func(c *gofish.APIClient) error {
		b := newBudget()
		st, err := d.controller(c, b, op, controller)
		if err != nil {
			return err
		}
		p, _, ok, err := d.findVolume(c, b, st, id)
		if err != nil {
			return err
		}
		if !ok {
			return d.opErr(op, bmc.ErrInvalid, "controller "+strconv.Quote(st.ID)+" has no volume "+strconv.Quote(id), nil)
		}
		if !validPath(p) {
			return errBadLink
		}
		err = d.retrying(c, "DELETE "+p, func() error {
			resp, err := c.Delete(p)
			if err != nil {
				return err
			}
			_, err = readAnswer(resp)
			return err
		})
		if err != nil {
			return err
		}
		deadline := time.Now().Add(d.cfg.TaskTimeout)
		for i := 0; ; i++ {
			_, _, still, err := d.findVolume(c, newBudget(), st, id)
			if err == nil && !still {
				return nil
			}
			if i >= maxPowerPolls || time.Now().After(deadline) {
				return d.opErr(op, bmc.ErrTimeout, "the BMC accepted the deletion but still lists volume "+strconv.Quote(id)+
					" after "+d.cfg.TaskTimeout.String(), err)
			}
			if err := sleepCtx(ctx, d.cfg.PollInterval); err != nil {
				return d.opErr(op, bmc.ErrTimeout, "the BMC accepted the deletion; volume "+strconv.Quote(id)+" is still listed at the deadline", err)
			}
		}
	})
}

// rfDrive is the part of a Drive an erase reads.
type rfDrive struct {
	Status  rfStatus
	Actions struct {
		SecureErase *struct {
			Target string `json:"target"`
		} `json:"#Drive.SecureErase"`
	}
}

// EraseDrive implements bmc.StorageManager: the drive's Drive.SecureErase, or, where the
// drive has none, Volume.Initialize (Slow where offered) of the volume made of that drive
// alone; a drive in a volume with other drives is ErrUnsupported, nothing sent, since
// initializing the volume would erase them too. Read back: the drive is read again and
// must still be present (an erase shows nothing else a client can compare; a BMC that
// runs it as a task gives its progress in the drive's Operations).
func (d *Driver) EraseDrive(ctx context.Context, controller, drive string) error {
	const op = "erase-drive"
	return d.do(ctx, op, func(c *gofish.APIClient) error {
		b := newBudget()
		st, err := d.controller(c, b, op, controller)
		if err != nil {
			all, aerr := d.controllers(c, b, controller)
			if aerr != nil || len(all) != 1 {
				return err
			}
			st = all[0] // a controller without volumes may still erase its drives
		}
		dp, ok := drivePath(st, drive)
		if !ok {
			return d.opErr(op, bmc.ErrInvalid, "controller "+strconv.Quote(st.ID)+" has no drive "+strconv.Quote(drive), nil)
		}
		var dr rfDrive
		if _, err := b.get(c, dp, &dr); err != nil {
			return err
		}
		if dr.Actions.SecureErase != nil {
			if _, err := d.action(c, dr.Actions.SecureErase.Target, "", map[string]any{}); err != nil {
				return err
			}
			return d.driveStillThere(c, op, dp)
		}
		if st.Volumes.ID == "" {
			return d.opErr(op, bmc.ErrUnsupported, "drive "+strconv.Quote(drive)+" has no SecureErase and its controller no volumes", nil)
		}
		vs, _, err := d.volumes(c, b, st)
		if err != nil {
			return err
		}
		for _, v := range vs {
			in := slices.ContainsFunc(v.Links.Drives, func(x odataID) bool { return x.ID == dp })
			switch {
			case !in:
				continue
			case len(v.Links.Drives) > 1:
				return d.opErr(op, bmc.ErrUnsupported, "drive "+strconv.Quote(drive)+" has no SecureErase and its volume "+
					strconv.Quote(v.ID)+" spans other drives, which initializing it would erase too", nil)
			case v.Actions.Initialize == nil:
				return d.opErr(op, bmc.ErrUnsupported, "drive "+strconv.Quote(drive)+" has no SecureErase and its volume "+
					strconv.Quote(v.ID)+" no Initialize", nil)
			}
			typ := "Slow"
			if al := v.Actions.Initialize.Allowed; len(al) > 0 && !slices.Contains(al, typ) {
				typ = al[0]
			}
			if _, err := d.action(c, v.Actions.Initialize.Target, "", map[string]any{"InitializeType": typ}); err != nil {
				return err
			}
			return d.driveStillThere(c, op, dp)
		}
		return d.opErr(op, bmc.ErrUnsupported, "drive "+strconv.Quote(drive)+" has no SecureErase and is in no volume to initialize", nil)
	})
}

func (d *Driver) driveStillThere(c *gofish.APIClient, op, dp string) error {
	var dr rfDrive
	if _, err := getRaw(c, dp, &dr); err != nil {
		return d.opErr(op, bmc.ErrOutcomeUnknown, "the BMC accepted the erase but the drive cannot be read since", err)
	}
	if dr.Status.State == "Absent" {
		return d.opErr(op, bmc.ErrOutcomeUnknown, "the BMC accepted the erase and the drive reads Absent since", nil)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var _ bmc.StorageManager = (*Driver)(nil)
