package sitelink_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/google/go-cmp/cmp"
)

// FuzzBMCOp: whatever command the control plane sends, BMCOp either refuses it as invalid
// or unsupported (a not-sent result naming the command) or returns an operation of the
// command's kind, valid, on a target that converts back to itself; the image is asked for
// exactly for the kinds that carry one, in canonical form.
func FuzzBMCOp(f *testing.F) {
	for _, s := range []string{
		`{"id":"b1","kind":"bmc.power","bmc":{"target":{"driver":"redfish","address":"198.51.100.10","credential":"bmc-1","cert_sha256":"` + pin + `"},"action":"cycle"}}`,
		`{"id":"b2","kind":"bmc.rotate","bmc":{"target":{"driver":"ipmi","address":"198.51.100.11","credential":"bmc-2"},"username":"admin","new_credential":"bmc-2-next"}}`,
		`{"id":"b3","kind":"bmc.boot","bmc":{"target":{"driver":"redfish","address":"a","credential":"c","insecure":true},"device":"pxe","mode":"uefi","persistent":true}}`,
		`{"id":"b4","kind":"bmc.firmware","bmc":{"target":{"driver":"redfish","address":"a","credential":"c"},"sha256":"` + digest + `","components":["BMC"]}}`,
		`{"id":"b5","kind":"bmc.mediaInsert","bmc":{"target":{"driver":"redfish","address":"a","credential":"c"},"sha256":"sha256:` + digest + `"}}`,
		`{"id":"b6","kind":"bmc.query","bmc":{"target":{"driver":"redfish","address":"a","credential":"c","cert_sha256":"zz"}}}`,
		`{"id":"b7","kind":"bmc.storage"}`,
		`{"id":"b10","kind":"bmc.storage","bmc":{"target":{"driver":"redfish","address":"a","credential":"c"},"storage_action":"create-volume","controller":"RAID1","raid_type":"RAID1","drives":["Disk.0","Disk.1"],"volume_name":"os","capacity_bytes":1073741824}}`,
		`{"id":"b11","kind":"bmc.storage","bmc":{"target":{"driver":"redfish","address":"a","credential":"c"},"storage_action":"erase-drive","drives":["Disk.2"]}}`,
		`{"id":"b12","kind":"bmc.storage","bmc":{"target":{"driver":"redfish","address":"a","credential":"c"},"storage_action":"delete-volume","volume":"v1"}}`,
		`{"id":"b8","kind":"bmc.mediaEject","bmc":{"target":{"driver":"x","address":"y","credential":""}}}`,
		`{"id":"b9","kind":"boot.cleanUp","bmc":{"target":{"driver":"x","address":"y"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c sitelink.Command
		if json.Unmarshal(b, &c) != nil {
			return
		}
		var asked []string
		image := func(_ sitelink.Command, sum string) (bmc.ImageURL, error) {
			asked = append(asked, sum)
			return bmc.StaticURL("https://cache.example/" + sum), nil
		}
		ref, op, err := sitelink.BMCOp(c, image)
		if err != nil {
			if op != nil {
				t.Fatalf("%s: an operation beside error %v", b, err)
			}
			if !errors.Is(err, bmc.ErrInvalid) && !errors.Is(err, bmc.ErrUnsupported) {
				t.Fatalf("%s: error %v is neither invalid nor unsupported", b, err)
			}
			r := sitelink.NotSentResult(c, err)
			if r.ID != c.ID || r.Kind != c.Kind || r.Status != sitelink.StatusNotSent || r.ErrorKind == "" {
				t.Fatalf("%s: not-sent result %+v", b, r)
			}
			return
		}
		if string(op.Kind()) != c.Kind || !sitelink.IsBMCKind(c.Kind) || op.Kind().Destructive() != sitelink.Destructive(c.Kind) {
			t.Fatalf("%s: op %v of kind %q", b, op, op.Kind())
		}
		if err := op.Validate(); err != nil {
			t.Fatalf("%s: op does not validate: %v", b, err)
		}
		// Of bmc.storage, only a change is claimed; the listing only reads.
		if list := c.Kind == sitelink.KindBMCStorage && (c.BMC.StorageAction == "" || c.BMC.StorageAction == "list"); bmc.IsDestructive(op) == (list || c.Kind == sitelink.KindBMCQuery) {
			t.Fatalf("%s: %T destructive %v", b, op, bmc.IsDestructive(op))
		}
		wantImage := c.Kind == sitelink.KindBMCFirmware || c.Kind == sitelink.KindBMCMediaInsert
		if wantImage != (len(asked) == 1) || len(asked) > 1 {
			t.Fatalf("%s: image asked %q", b, asked)
		}
		if wantImage && (len(asked[0]) != 64 || hex.EncodeToString(must(hex.DecodeString(asked[0]))) != asked[0]) {
			t.Fatalf("%s: image asked by %q", b, asked[0])
		}
		back := sitelink.BMCTarget{Driver: ref.Driver, Address: ref.Address, Credential: ref.Credential, Insecure: ref.Insecure}
		if ref.CertSHA256 != nil {
			back.CertSHA256 = hex.EncodeToString(ref.CertSHA256)
		}
		again, err := back.Ref()
		if err != nil {
			t.Fatalf("%s: target %+v does not convert back: %v", b, back, err)
		}
		if diff := cmp.Diff(ref, again); diff != "" {
			t.Fatalf("%s: target round trip (-first +again):\n%s", b, diff)
		}
		if c.BMC.Target.Driver != ref.Driver || c.BMC.Target.Address != ref.Address || c.BMC.Target.Credential != ref.Credential {
			t.Fatalf("%s: target %+v", b, ref)
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
