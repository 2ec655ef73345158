package redfish_test

import (
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/google/go-cmp/cmp"
)

func TestVolumeCreatedReadBackAndDeleted(t *testing.T) {
	for _, noLoc := range []bool{false, true} {
		name := map[bool]string{false: "location", true: "found by listing"}[noLoc]
		t.Run(name, func(t *testing.T) {
			srv, d := start(t, bmctest.Options{Storage: &bmctest.StorageOptions{NoLocation: noLoc}}, redfish.Config{})
			v, err := d.CreateVolume(ctx(t), bmc.VolumeSpec{Name: "os", RAIDType: "RAID1", Drives: []string{"Disk.1", "Disk.0"}})
			if err != nil {
				t.Fatalf("CreateVolume: %v", err)
			}
			want := bmc.Volume{Controller: "RAID1", ID: v.ID, Name: "os", RAIDType: "RAID1", CapacityBytes: bmctest.DriveCapacity,
				Drives: []string{"Disk.1", "Disk.0"}}
			if diff := cmp.Diff(want, v); diff != "" || v.ID == "" {
				t.Errorf("volume read back (-want +got):\n%s", diff)
			}
			ctl := srv.StoragePath()
			if got := sent(srv.Requests()); !cmp.Equal(got, []string{"POST " + ctl + "/Volumes"}) {
				t.Errorf("sent %q, want one POST to the collection", got)
			}
			var body map[string]any
			for _, r := range srv.Requests() {
				if r.Method == "POST" {
					body = r.JSON()
				}
			}
			links := body["Links"].(map[string]any)["Drives"].([]any)
			if body["RAIDType"] != "RAID1" || len(links) != 2 || links[0].(map[string]any)["@odata.id"] != ctl+"/Drives/Disk.1" {
				t.Errorf("POST body %v", body)
			}
			vs, err := d.Volumes(ctx(t), "")
			if err != nil || len(vs) != 1 || vs[0].ID != v.ID {
				t.Fatalf("Volumes = %v, %v; want the one created", vs, err)
			}
			srv.ResetRequests()
			if err := d.DeleteVolume(ctx(t), "RAID1", v.ID); err != nil {
				t.Fatalf("DeleteVolume: %v", err)
			}
			if got := sent(srv.Requests()); !cmp.Equal(got, []string{"DELETE " + ctl + "/Volumes/" + v.ID}) {
				t.Errorf("sent %q, want one DELETE", got)
			}
			if vs, err := d.Volumes(ctx(t), "RAID1"); err != nil || len(vs) != 0 {
				t.Errorf("Volumes after the deletion = %v, %v", vs, err)
			}
			srv.ResetRequests()
			kindIs(t, d.DeleteVolume(ctx(t), "RAID1", v.ID), bmc.ErrInvalid)
			if got := sent(srv.Requests()); len(got) != 0 {
				t.Errorf("deleting a volume that is not there sent %q", got)
			}
		})
	}
}

func TestVolumeKeptDifferentlyIsErrDiffers(t *testing.T) {
	srv, d := start(t, bmctest.Options{Storage: &bmctest.StorageOptions{KeepRAIDType: "RAID0"}}, redfish.Config{})
	v, err := d.CreateVolume(ctx(t), bmc.VolumeSpec{RAIDType: "RAID1", Drives: []string{"Disk.0", "Disk.1"}})
	kindIs(t, err, bmc.ErrDiffers)
	if v.RAIDType != "RAID0" || v.ID == "" {
		t.Errorf("volume %+v, want the RAID0 volume the BMC kept", v)
	}
	if vs, _ := d.Volumes(ctx(t), ""); len(vs) != 1 {
		t.Errorf("%d volumes, want the one created", len(vs))
	}
	_ = srv
}

func TestVolumeRefusedBeforeSending(t *testing.T) {
	srv, d := start(t, bmctest.Options{Storage: &bmctest.StorageOptions{}}, redfish.Config{})
	kindIs(t, func() error {
		_, err := d.CreateVolume(ctx(t), bmc.VolumeSpec{RAIDType: "RAID1", Drives: []string{"Disk.0", "Disk.9"}})
		return err
	}(), bmc.ErrInvalid)
	kindIs(t, func() error {
		_, err := d.CreateVolume(ctx(t), bmc.VolumeSpec{Controller: "HBA9", RAIDType: "RAID1", Drives: []string{"Disk.0"}})
		return err
	}(), bmc.ErrUnsupported)
	kindIs(t, d.EraseDrive(ctx(t), "", "Disk.9"), bmc.ErrInvalid)
	if got := sent(srv.Requests()); len(got) != 0 {
		t.Errorf("sent %q for requests refused before sending", got)
	}
	// A RAID level the controller refuses: its 400 is ErrRefused, nothing created.
	_, err := d.CreateVolume(ctx(t), bmc.VolumeSpec{RAIDType: "RAID60", Drives: []string{"Disk.0"}})
	kindIs(t, err, bmc.ErrRefused)
	if vs, _ := d.Volumes(ctx(t), ""); len(vs) != 0 {
		t.Errorf("volumes %v after a refusal", vs)
	}
}

func TestVolumesUnsupportedWithoutStorage(t *testing.T) {
	// DMTF's public-rackmount1 has SimpleStorage only.
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	_, err := d.CreateVolume(ctx(t), bmc.VolumeSpec{RAIDType: "RAID1", Drives: []string{"Disk.0", "Disk.1"}})
	kindIs(t, err, bmc.ErrUnsupported)
	kindIs(t, d.DeleteVolume(ctx(t), "", "1"), bmc.ErrUnsupported)
	kindIs(t, d.EraseDrive(ctx(t), "", "Disk.0"), bmc.ErrUnsupported)
	if got := sent(srv.Requests()); len(got) != 0 {
		t.Errorf("sent %q", got)
	}
}

func TestEraseDrive(t *testing.T) {
	t.Run("SecureErase", func(t *testing.T) {
		srv, d := start(t, bmctest.Options{Storage: &bmctest.StorageOptions{}}, redfish.Config{})
		if err := d.EraseDrive(ctx(t), "RAID1", "Disk.2"); err != nil {
			t.Fatalf("EraseDrive: %v", err)
		}
		ctl := srv.StoragePath()
		if got := srv.Erasures(); !cmp.Equal(got, []string{ctl + "/Drives/Disk.2"}) {
			t.Errorf("erased %q, want Disk.2", got)
		}
	})
	t.Run("volume Initialize where the drive has no SecureErase", func(t *testing.T) {
		srv, d := start(t, bmctest.Options{Storage: &bmctest.StorageOptions{NoSecureErase: true}}, redfish.Config{})
		single, err := d.CreateVolume(ctx(t), bmc.VolumeSpec{RAIDType: "RAID0", Drives: []string{"Disk.0"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.CreateVolume(ctx(t), bmc.VolumeSpec{RAIDType: "RAID1", Drives: []string{"Disk.1", "Disk.2"}}); err != nil {
			t.Fatal(err)
		}
		if err := d.EraseDrive(ctx(t), "", "Disk.0"); err != nil {
			t.Fatalf("EraseDrive of a drive alone in its volume: %v", err)
		}
		ctl := srv.StoragePath()
		if got := srv.Erasures(); !cmp.Equal(got, []string{ctl + "/Volumes/" + single.ID}) {
			t.Errorf("erased %q, want volume %s initialized", got, single.ID)
		}
		var init map[string]any
		for _, r := range srv.Requests() {
			if r.Method == "POST" {
				init = r.JSON()
			}
		}
		if init["InitializeType"] != "Slow" {
			t.Errorf("Initialize body %v, want Slow", init)
		}
		srv.ResetRequests()
		kindIs(t, d.EraseDrive(ctx(t), "", "Disk.1"), bmc.ErrUnsupported) // its volume spans Disk.2
		kindIs(t, d.EraseDrive(ctx(t), "", "Disk.3"), bmc.ErrUnsupported) // in no volume
		if got := sent(srv.Requests()); len(got) != 0 {
			t.Errorf("sent %q for erases refused before sending", got)
		}
	})
}
