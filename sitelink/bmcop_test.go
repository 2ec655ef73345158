package sitelink_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/google/go-cmp/cmp"
)

const (
	pin    = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
	digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
)

var target = sitelink.BMCTarget{Driver: "redfish", Address: "https://198.51.100.10", Credential: "bmc-1"}

func bmcCommand(kind string, body sitelink.BMCCommand) sitelink.Command {
	if body.Target == (sitelink.BMCTarget{}) {
		body.Target = target
	}
	return sitelink.Command{ID: "cmd-1", Kind: kind, BMC: &body}
}

// images answers every image with a URL naming its digest and records what it was asked.
type images struct{ asked []string }

func (m *images) get(c sitelink.Command, sum string) (bmc.ImageURL, error) {
	m.asked = append(m.asked, sum)
	return bmc.StaticURL("https://cache.example/t/GRANT/" + sum), nil
}

func TestBMCOpKinds(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		kind string
		body sitelink.BMCCommand
		want bmc.Op // compared by %v, except the image
		url  string // the image URL, for firmware and media insert
	}{
		{kind: sitelink.KindBMCQuery, want: bmc.Query{}},
		{kind: sitelink.KindBMCStorage, want: bmc.ListStorage{}},
		{kind: sitelink.KindBMCStorage, body: sitelink.BMCCommand{StorageAction: "list", Volume: "ignored"}, want: bmc.ListStorage{}},
		{kind: sitelink.KindBMCStorage, body: sitelink.BMCCommand{StorageAction: "create-volume", Controller: "RAID1", VolumeName: "os",
			RAIDType: "RAID1", Drives: []string{"Disk.0", "Disk.1"}, CapacityBytes: 1 << 30},
			want: bmc.CreateVolume{Spec: bmc.VolumeSpec{Controller: "RAID1", Name: "os", RAIDType: "RAID1", Drives: []string{"Disk.0", "Disk.1"}, CapacityBytes: 1 << 30}}},
		{kind: sitelink.KindBMCStorage, body: sitelink.BMCCommand{StorageAction: "delete-volume", Controller: "RAID1", Volume: "v1"},
			want: bmc.DeleteVolume{Controller: "RAID1", Volume: "v1"}},
		{kind: sitelink.KindBMCStorage, body: sitelink.BMCCommand{StorageAction: "erase-drive", Drives: []string{"Disk.2"}},
			want: bmc.EraseDrive{Drive: "Disk.2"}},
		{kind: sitelink.KindBMCPower, body: sitelink.BMCCommand{Action: "cycle"}, want: bmc.SetPower{Action: bmc.PowerActionCycle}},
		{kind: sitelink.KindBMCBoot, body: sitelink.BMCCommand{Device: "pxe", Mode: "uefi", Persistent: true},
			want: bmc.SetBoot{Device: bmc.BootDevice{Target: bmc.BootTarget("pxe"), Mode: bmc.BootMode("uefi"), Persistent: true}}},
		{kind: sitelink.KindBMCRotate, body: sitelink.BMCCommand{Username: "admin", NewCredential: "bmc-1-next"},
			want: bmc.Rotate{Username: "admin", NewCredential: "bmc-1-next"}},
		{kind: sitelink.KindBMCFirmware, body: sitelink.BMCCommand{SHA256: digest, Components: []string{"BMC"}},
			want: bmc.Firmware{Targets: []string{"BMC"}}, url: "https://cache.example/t/GRANT/" + digest},
		// The cache takes a prefixed or upper-case digest; the image is asked in lower case.
		{kind: sitelink.KindBMCMediaInsert, body: sitelink.BMCCommand{SHA256: "sha256:" + strings.ToUpper(digest)},
			want: bmc.InsertMedia{}, url: "https://cache.example/t/GRANT/" + digest},
		{kind: sitelink.KindBMCMediaEject, want: bmc.EjectMedia{}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			var im images
			tg, op, err := sitelink.BMCOp(bmcCommand(tc.kind, tc.body), im.get)
			if err != nil {
				t.Fatal(err)
			}
			want := bmc.TargetRef{Driver: target.Driver, Address: target.Address, Credential: target.Credential}
			if diff := cmp.Diff(want, tg); diff != "" {
				t.Errorf("target (-want +got):\n%s", diff)
			}
			if op.Kind() != bmc.Kind(tc.kind) {
				t.Errorf("op kind %q, want %q", op.Kind(), tc.kind)
			}
			var u bmc.ImageURL
			switch o := op.(type) {
			case bmc.Firmware:
				u = o.Image
				if diff := cmp.Diff(tc.want.(bmc.Firmware).Targets, o.Targets); diff != "" {
					t.Errorf("components (-want +got):\n%s", diff)
				}
			case bmc.InsertMedia:
				u = o.Image
			default:
				if diff := cmp.Diff(tc.want, op); diff != "" {
					t.Errorf("op (-want +got):\n%s", diff)
				}
			}
			if tc.url == "" {
				if len(im.asked) != 0 {
					t.Errorf("image asked for %s", tc.kind)
				}
				return
			}
			got, err := u(ctx)
			if err != nil || got != tc.url {
				t.Errorf("image URL %q, %v; want %q", got, err, tc.url)
			}
		})
	}
}

func TestBMCOpRefuses(t *testing.T) {
	long := strings.Repeat("a", 513)
	errNoImage := errors.New("image missing")
	imageNotCached := func(c sitelink.Command, sum string) (bmc.ImageURL, error) {
		return nil, &bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: "image " + sum + " is not in the cache"}
	}
	for _, tc := range []struct {
		name  string
		c     sitelink.Command
		image sitelink.BMCImageFunc
		kind  error
		msg   string // the not-sent result's message
	}{
		{name: "no body", c: sitelink.Command{ID: "x", Kind: sitelink.KindBMCPower}, kind: bmc.ErrInvalid,
			msg: `bmc: invalid request (bmc.power): command without a bmc body`},
		{name: "no driver", c: bmcCommand(sitelink.KindBMCQuery, sitelink.BMCCommand{Target: sitelink.BMCTarget{Address: "a", Credential: "c"}}),
			kind: bmc.ErrInvalid, msg: `bmc: invalid request (bmc.query): target: want a driver, an address and a credential reference`},
		{name: "no address", c: bmcCommand(sitelink.KindBMCQuery, sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: "ipmi", Credential: "c"}}),
			kind: bmc.ErrInvalid, msg: `bmc: invalid request (bmc.query): target: want a driver, an address and a credential reference`},
		{name: "long address", c: bmcCommand(sitelink.KindBMCQuery, sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: "ipmi", Address: long}}),
			kind: bmc.ErrInvalid, msg: `bmc: invalid request (bmc.query): target: want a driver, an address and a credential reference`},
		{name: "long credential", c: bmcCommand(sitelink.KindBMCQuery, sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: "ipmi", Address: "a", Credential: long}}),
			kind: bmc.ErrInvalid, msg: `bmc: invalid request (bmc.query): target: want a driver, an address and a credential reference`},
		{name: "pin not hex", c: bmcCommand(sitelink.KindBMCQuery, sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: "redfish", Address: "a", CertSHA256: strings.Repeat("g", 64)}}),
			kind: bmc.ErrInvalid, msg: `bmc: invalid request (bmc.query): target: cert_sha256 wants 64 hex digits`},
		{name: "pin short", c: bmcCommand(sitelink.KindBMCQuery, sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: "redfish", Address: "a", CertSHA256: pin[:62]}}),
			kind: bmc.ErrInvalid, msg: `bmc: invalid request (bmc.query): target: cert_sha256 wants 64 hex digits`},
		{name: "pin long", c: bmcCommand(sitelink.KindBMCQuery, sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: "redfish", Address: "a", CertSHA256: pin + "00"}}),
			kind: bmc.ErrInvalid, msg: `bmc: invalid request (bmc.query): target: cert_sha256 wants 64 hex digits`},
		{name: "bad digest", c: bmcCommand(sitelink.KindBMCFirmware, sitelink.BMCCommand{SHA256: digest[:63]}), kind: bmc.ErrInvalid,
			msg: `bmc: invalid request (bmc.firmware): sha256: want 64 lower-case hex digits`},
		{name: "no digest", c: bmcCommand(sitelink.KindBMCMediaInsert, sitelink.BMCCommand{}), kind: bmc.ErrInvalid,
			msg: `bmc: invalid request (bmc.mediaInsert): sha256: want 64 lower-case hex digits`},
		{name: "no image source", c: bmcCommand(sitelink.KindBMCFirmware, sitelink.BMCCommand{SHA256: digest}), image: nil, kind: bmc.ErrUnsupported,
			msg: `bmc: unsupported (bmc.firmware): no image source for bmc.firmware`},
		{name: "image not cached", c: bmcCommand(sitelink.KindBMCFirmware, sitelink.BMCCommand{SHA256: digest}), image: imageNotCached, kind: bmc.ErrInvalid,
			msg: `bmc: invalid request (bmc.firmware): image ` + digest + ` is not in the cache`},
		{name: "image error", c: bmcCommand(sitelink.KindBMCMediaInsert, sitelink.BMCCommand{SHA256: digest}),
			image: func(sitelink.Command, string) (bmc.ImageURL, error) { return nil, errNoImage }, kind: bmc.ErrInvalid,
			msg: `bmc: invalid request (bmc.mediaInsert): no image ` + digest},
		{name: "unknown action", c: bmcCommand(sitelink.KindBMCPower, sitelink.BMCCommand{Action: "explode"}), kind: bmc.ErrInvalid,
			msg: `bmc: invalid request (power): unknown power action "explode"`},
		{name: "no action", c: bmcCommand(sitelink.KindBMCPower, sitelink.BMCCommand{}), kind: bmc.ErrInvalid},
		{name: "unknown device", c: bmcCommand(sitelink.KindBMCBoot, sitelink.BMCCommand{Device: "floppy"}), kind: bmc.ErrInvalid},
		{name: "rotate without credential", c: bmcCommand(sitelink.KindBMCRotate, sitelink.BMCCommand{Username: "admin"}), kind: bmc.ErrInvalid,
			msg: `bmc: invalid request (rotate): rotation without a new credential`},
		{name: "not a bmc kind", c: bmcCommand(sitelink.KindCleanUp, sitelink.BMCCommand{}), kind: bmc.ErrInvalid,
			msg: `bmc: invalid request: unknown command kind "boot.cleanUp"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, op, err := sitelink.BMCOp(tc.c, tc.image)
			if err == nil || op != nil {
				t.Fatalf("BMCOp = %v, %v; want a refusal", op, err)
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %v, want kind %v", err, tc.kind)
			}
			if tc.name == "image error" && !errors.Is(err, errNoImage) {
				t.Errorf("error %v does not wrap the image's", err)
			}
			r := sitelink.NotSentResult(tc.c, err)
			if r.ID != tc.c.ID || r.Kind != tc.c.Kind || r.Status != sitelink.StatusNotSent || r.ErrorKind != bmc.KindName(tc.kind) {
				t.Errorf("result %+v", r)
			}
			if tc.msg != "" && r.Message != tc.msg {
				t.Errorf("message %q, want %q", r.Message, tc.msg)
			}
		})
	}
}

func TestBMCTargetRef(t *testing.T) {
	tg := target
	tg.CertSHA256, tg.Insecure = strings.ToUpper(pin), true
	ref, err := tg.Ref()
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.CertSHA256) != 32 || ref.CertSHA256[0] != 0x2c || ref.CertSHA256[31] != 0xae || !ref.Insecure {
		t.Errorf("ref %+v", ref)
	}
	if _, err := (sitelink.BMCTarget{Driver: "redfish"}).Ref(); !errors.Is(err, bmc.ErrInvalid) {
		t.Errorf("target without an address: %v", err)
	}
}

func TestNotSentResultKeepsTheCode(t *testing.T) {
	c := bmcCommand(sitelink.KindBMCPower, sitelink.BMCCommand{Action: "on"})
	r := sitelink.NotSentResult(c, &bmc.OpError{Op: "power", Kind: bmc.ErrRefused, Code: "409", Message: "busy"})
	want := sitelink.BMCResult{ID: "cmd-1", Kind: "bmc.power", Status: "not-sent", ErrorKind: "refused", Code: "409",
		Message: `bmc: refused by the BMC (power): 409: busy`}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestBMCResultOf(t *testing.T) {
	inv := bmc.Inventory{
		UUID: hwid.MustParseUUID("4c4c4544-0051-3510-8057-b7c04f4b3232"), HasUUID: true,
		Manufacturer: "Contoso", Model: "R1", Serial: "S1",
		NICs:      []bmc.NIC{{MAC: hwid.MustParseMAC("52:54:00:aa:bb:01")}, {MAC: hwid.MustParseMAC("52:54:00:aa:bb:02")}},
		NICsKnown: true,
		HostAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.7")},
		BMCAddrs:  []netip.Addr{netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("2001:db8::10")},
		BMCMAC:    hwid.MustParseMAC("52:54:00:00:00:10"),
	}
	ok := bmc.Outcome{Status: bmc.StatusOK}
	for _, tc := range []struct {
		name string
		kind string
		r    bmc.Result
		want sitelink.BMCResult
	}{
		{name: "query", kind: sitelink.KindBMCQuery,
			r: bmc.Result{Outcome: ok, Value: bmc.QueryResult{Power: bmc.PowerOn, Inventory: inv, Inspected: true}},
			want: sitelink.BMCResult{Status: "ok", Power: "on", Inventory: &sitelink.BMCInventory{
				UUID: "4c4c4544-0051-3510-8057-b7c04f4b3232", Manufacturer: "Contoso", Model: "R1", Serial: "S1", NICsKnown: true,
				MACs: []string{"52:54:00:aa:bb:01", "52:54:00:aa:bb:02"}, HostAddrs: []string{"192.0.2.7"},
				BMCAddrs: []string{"198.51.100.10", "2001:db8::10"}, BMCMAC: "52:54:00:00:00:10"}}},
		{name: "query partly inspected", kind: sitelink.KindBMCQuery,
			r: bmc.Result{Outcome: bmc.Outcome{Status: bmc.StatusFailed, Kind: "partial", Message: "m"},
				Value: bmc.QueryResult{Inventory: bmc.Inventory{Serial: "S2"}, Inspected: true, Failed: []string{"system-guid"}}},
			want: sitelink.BMCResult{Status: "failed", ErrorKind: "partial", Message: "m",
				Inventory: &sitelink.BMCInventory{Serial: "S2", Failed: []string{"system-guid"}}}},
		{name: "query not inspected", kind: sitelink.KindBMCQuery,
			r:    bmc.Result{Outcome: bmc.Outcome{Status: bmc.StatusFailed, Kind: "timeout"}, Value: bmc.QueryResult{Power: bmc.PowerOff}},
			want: sitelink.BMCResult{Status: "failed", ErrorKind: "timeout", Power: "off"}},
		{name: "storage", kind: sitelink.KindBMCStorage,
			r:    bmc.Result{Outcome: ok, Value: []bmc.Disk{{Name: "Disk 0", Model: "SSD 1", Serial: "S1", CapacityBytes: 960197124096, Controller: "RAID.1", Health: "OK"}}},
			want: sitelink.BMCResult{Status: "ok", Disks: []sitelink.Disk{{Name: "Disk 0", Model: "SSD 1", Serial: "S1", CapacityBytes: 960197124096, Controller: "RAID.1", Health: "OK"}}}},
		{name: "volume created", kind: sitelink.KindBMCStorage,
			r:    bmc.Result{Outcome: ok, Value: bmc.Volume{Controller: "RAID1", ID: "v7", Name: "os", RAIDType: "RAID1", CapacityBytes: 960197124096, Drives: []string{"Disk.0", "Disk.1"}}},
			want: sitelink.BMCResult{Status: "ok", Volume: &sitelink.Volume{Controller: "RAID1", ID: "v7", Name: "os", RAIDType: "RAID1", CapacityBytes: 960197124096, Drives: []string{"Disk.0", "Disk.1"}}}},
		{name: "storage empty", kind: sitelink.KindBMCStorage,
			r:    bmc.Result{Outcome: ok, Value: []bmc.Disk(nil)},
			want: sitelink.BMCResult{Status: "ok", Disks: []sitelink.Disk{}}},
		{name: "firmware", kind: sitelink.KindBMCFirmware,
			r: bmc.Result{Outcome: bmc.Outcome{Status: bmc.StatusFailed, Kind: "refused", Code: "400 Base.1.8.ActionNotSupported", Message: "no"},
				Value: bmc.FirmwareResult{Task: "7", State: "Exception", Messages: []string{"Image rejected"}}},
			want: sitelink.BMCResult{Status: "failed", ErrorKind: "refused", Code: "400 Base.1.8.ActionNotSupported", Message: "no",
				Firmware: &sitelink.FirmwareResult{Task: "7", State: "Exception", Messages: []string{"Image rejected"}}}},
		{name: "power", kind: sitelink.KindBMCPower, r: bmc.Result{Outcome: ok}, want: sitelink.BMCResult{Status: "ok"}},
		{name: "differs", kind: sitelink.KindBMCBoot, r: bmc.Result{Outcome: bmc.Outcome{Status: bmc.StatusDiffers, Kind: "differs", Message: "kept Continuous"}},
			want: sitelink.BMCResult{Status: "differs", ErrorKind: "differs", Message: "kept Continuous"}},
		// Nothing ran: whatever Value holds is not reported.
		{name: "replayed", kind: sitelink.KindBMCFirmware,
			r:    bmc.Result{Outcome: bmc.Outcome{Status: bmc.StatusUnknown, Kind: "outcome-unknown"}, Replayed: true, Value: bmc.FirmwareResult{Task: "7"}},
			want: sitelink.BMCResult{Status: "unknown", ErrorKind: "outcome-unknown", Replayed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sitelink.Command{ID: "cmd-9", Kind: tc.kind, BMC: &sitelink.BMCCommand{Target: target}}
			tc.want.ID, tc.want.Kind = c.ID, c.Kind
			if diff := cmp.Diff(tc.want, sitelink.BMCResultOf(c, tc.r)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestBMCStorageChanges: bmc.storage is a destructive kind on the wire, as the seed lists
// it; its changes are destructive operations (claimed), its listing is not; arguments no
// BMC accepts are refused before anything is sent.
func TestBMCStorageChanges(t *testing.T) {
	if !sitelink.Destructive(sitelink.KindBMCStorage) {
		t.Error("bmc.storage is not destructive")
	}
	for action, destructive := range map[string]bool{"": false, "list": false, "create-volume": true, "delete-volume": true, "erase-drive": true} {
		body := sitelink.BMCCommand{StorageAction: action, RAIDType: "RAID0", Drives: []string{"Disk.0"}, Volume: "v1"}
		_, op, err := sitelink.BMCOp(bmcCommand(sitelink.KindBMCStorage, body), nil)
		if err != nil {
			t.Errorf("%q: %v", action, err)
			continue
		}
		if bmc.IsDestructive(op) != destructive {
			t.Errorf("%q: %T destructive %v, want %v", action, op, bmc.IsDestructive(op), destructive)
		}
	}
	for name, body := range map[string]sitelink.BMCCommand{
		"unknown action":           {StorageAction: "format"},
		"erase two drives":         {StorageAction: "erase-drive", Drives: []string{"Disk.0", "Disk.1"}},
		"erase no drive":           {StorageAction: "erase-drive"},
		"delete no volume":         {StorageAction: "delete-volume"},
		"create an unknown RAID":   {StorageAction: "create-volume", RAIDType: "RAID7", Drives: []string{"Disk.0"}},
		"create without drives":    {StorageAction: "create-volume", RAIDType: "RAID1"},
		"create a negative volume": {StorageAction: "create-volume", RAIDType: "RAID1", Drives: []string{"Disk.0"}, CapacityBytes: -1},
	} {
		c := bmcCommand(sitelink.KindBMCStorage, body)
		_, op, err := sitelink.BMCOp(c, nil)
		if !errors.Is(err, bmc.ErrInvalid) || op != nil {
			t.Errorf("%s: %v, %v; want invalid", name, op, err)
		}
		if r := sitelink.NotSentResult(c, err); r.Status != sitelink.StatusNotSent || r.ErrorKind != "invalid" {
			t.Errorf("%s: %+v, want not sent, invalid", name, r)
		}
	}
}
