package sitelink

import (
	"encoding/hex"
	"errors"
	"strings"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/hwid"
)

// MaxAddressLen bounds BMCTarget.Address.
const MaxAddressLen = 512

// BMCImageFunc gives the URL a BMC fetches the image of a bmc.firmware or bmc.mediaInsert
// command from. sha256 is the command's BMCCommand.SHA256 as 64 lower-case hex digits. It
// is called while the command is converted; the ImageURL it returns is called only when
// the operation is sent, so a host mints a grant there, not here. An error refuses the
// command (not sent); an *bmc.OpError is reported as it is, any other error as kind
// bmc.ErrInvalid.
type BMCImageFunc func(c Command, sha256 string) (bmc.ImageURL, error)

// Ref checks t and returns the target the bmc.Executor runs on. A target without a driver
// or an address, with an address over MaxAddressLen or a credential reference over
// bmc.MaxIDLen, or with a CertSHA256 other than 64 hex digits is an *bmc.OpError of kind
// bmc.ErrInvalid.
func (t BMCTarget) Ref() (bmc.TargetRef, error) {
	ref, msg := t.ref()
	if msg != "" {
		return bmc.TargetRef{}, &bmc.OpError{Kind: bmc.ErrInvalid, Message: msg}
	}
	return ref, nil
}

// ref is Ref with the refusal as a message, so BMCOp can name the command in its error.
func (t BMCTarget) ref() (bmc.TargetRef, string) {
	if t.Driver == "" || t.Address == "" || len(t.Address) > MaxAddressLen || len(t.Credential) > bmc.MaxIDLen {
		return bmc.TargetRef{}, "target: want a driver, an address and a credential reference"
	}
	ref := bmc.TargetRef{Driver: t.Driver, Address: t.Address, Credential: t.Credential, Insecure: t.Insecure}
	if t.CertSHA256 != "" {
		pin, err := hex.DecodeString(t.CertSHA256)
		if err != nil || len(pin) != 32 {
			return bmc.TargetRef{}, "target: cert_sha256 wants 64 hex digits"
		}
		ref.CertSHA256 = pin
	}
	return ref, ""
}

// BMCOp turns a bmc.* command into the target and the typed operation a bmc.Executor runs
// (Executor.RunOp(ctx, c.ID, target, op)). image resolves the image of bmc.firmware and
// bmc.mediaInsert; nil refuses those two kinds (bmc.ErrUnsupported). A refusal is meant
// for NotSentResult (nothing was sent): an *bmc.OpError of kind bmc.ErrInvalid whose Op is
// c.Kind for a command without a body, a bad target or a malformed SHA256, image's error,
// or bmc.ParseOp's error for an unknown kind or arguments no BMC accepts.
func BMCOp(c Command, image BMCImageFunc) (bmc.TargetRef, bmc.Op, error) {
	invalid := func(msg string) error { return &bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: msg} }
	if c.BMC == nil {
		return bmc.TargetRef{}, nil, invalid("command without a bmc body")
	}
	tg, msg := c.BMC.Target.ref()
	if msg != "" {
		return bmc.TargetRef{}, nil, invalid(msg)
	}
	b := c.BMC
	args := bmc.Args{Device: b.Device, Mode: b.Mode, Persistent: b.Persistent, Action: b.Action,
		Username: b.Username, NewCredential: b.NewCredential, Components: b.Components}
	if c.Kind == KindBMCStorage {
		args.StorageAction, args.Controller, args.Volume, args.Drives = b.StorageAction, b.Controller, b.Volume, b.Drives
		args.RAIDType, args.VolumeName, args.CapacityBytes = b.RAIDType, b.VolumeName, b.CapacityBytes
	}
	if c.Kind == KindBMCFirmware || c.Kind == KindBMCMediaInsert {
		sum, ok := imageDigest(b.SHA256)
		if !ok {
			return bmc.TargetRef{}, nil, invalid("sha256: want 64 lower-case hex digits")
		}
		if image == nil {
			return bmc.TargetRef{}, nil, &bmc.OpError{Op: c.Kind, Kind: bmc.ErrUnsupported, Message: "no image source for " + c.Kind}
		}
		u, err := image(c, sum)
		if err != nil {
			var oe *bmc.OpError
			if errors.As(err, &oe) {
				return bmc.TargetRef{}, nil, err
			}
			return bmc.TargetRef{}, nil, &bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: "no image " + sum, Err: err}
		}
		args.Image = u
	}
	op, err := bmc.ParseOp(c.Kind, args)
	if err != nil {
		return bmc.TargetRef{}, nil, err
	}
	return tg, op, nil
}

// imageDigest reads a command's image digest as the agent's cache does: 64 hex digits of
// either case, "sha256:" allowed before them. It returns them in lower case.
func imageDigest(s string) (string, bool) {
	s = strings.TrimPrefix(s, "sha256:")
	if len(s) != 64 {
		return "", false
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return "", false
	}
	return hex.EncodeToString(b), true
}

// NotSentResult is the result of command c refused with err before anything was sent
// (BMCOp's error, a host that has no BMC access).
func NotSentResult(c Command, err error) BMCResult {
	o := bmc.NotSent(err)
	return BMCResult{ID: c.ID, Kind: c.Kind, Status: string(o.Status), ErrorKind: o.Kind, Code: o.Code, Message: o.Message}
}

// BMCResultOf is the result of command c, run to r by a bmc.Executor: its outcome, and,
// unless r was replayed (nothing ran, so nothing was read), what the operation read: the
// power state and inventory of bmc.query, the disks of a bmc.storage listing, the volume
// of its create-volume, the task of bmc.firmware.
func BMCResultOf(c Command, r bmc.Result) BMCResult {
	res := BMCResult{ID: c.ID, Kind: c.Kind, Status: string(r.Outcome.Status), ErrorKind: r.Outcome.Kind,
		Code: r.Outcome.Code, Message: r.Outcome.Message, Replayed: r.Replayed}
	if r.Replayed {
		return res
	}
	switch v := r.Value.(type) {
	case bmc.QueryResult:
		res.Power = string(v.Power)
		if v.Inspected {
			res.Inventory = BMCInventoryOf(v)
		}
	case []bmc.Disk:
		res.Disks = make([]Disk, 0, len(v))
		for _, d := range v {
			res.Disks = append(res.Disks, Disk(d))
		}
	case bmc.FirmwareResult:
		fr := FirmwareResult(v)
		res.Firmware = &fr
	case bmc.Volume:
		vol := Volume(v)
		res.Volume = &vol
	}
	return res
}

// BMCInventoryOf is what a query's inspection found, in the report's spelling.
func BMCInventoryOf(q bmc.QueryResult) *BMCInventory {
	inv := q.Inventory
	out := &BMCInventory{Manufacturer: inv.Manufacturer, Model: inv.Model, Serial: inv.Serial, NICsKnown: inv.NICsKnown, Failed: q.Failed}
	if inv.HasUUID {
		out.UUID = inv.UUID.String()
	}
	for _, n := range inv.NICs {
		out.MACs = append(out.MACs, n.MAC.String())
	}
	for _, a := range inv.HostAddrs {
		out.HostAddrs = append(out.HostAddrs, a.String())
	}
	for _, a := range inv.BMCAddrs {
		out.BMCAddrs = append(out.BMCAddrs, a.String())
	}
	if inv.BMCMAC != (hwid.MAC{}) {
		out.BMCMAC = inv.BMCMAC.String()
	}
	return out
}

// CommandID is the id of the command r answers (bmc.Report).
func (r BMCResult) CommandID() string { return r.ID }

// Tally is what r counts as in a bmc.Dispatcher's stats (bmc.Report).
func (r BMCResult) Tally() bmc.Tally {
	return bmc.Tally{Kind: bmc.Kind(r.Kind), Status: bmc.Status(r.Status), Replayed: r.Replayed}
}

var _ bmc.Report = BMCResult{}
