package controlplane_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestBMCStorageThroughClaims: bmc.storage is destructive on the wire, so the plane routes
// it through its claim registry like every destructive kind: a volume created and a drive
// erased through an agent are claimed by it (their records reported), the listing is only
// routed (never claimed: it only reads), and an erase claimed by an agent that was cut off
// and never reported is finished "outcome unknown" and never sent to the agent that takes
// over.
func TestBMCStorageThroughClaims(t *testing.T) {
	l := newBMCLab(t)
	srv := bmctest.NewServer(bmctest.Options{Storage: &bmctest.StorageOptions{}})
	t.Cleanup(srv.Close)
	a := l.agent("agent-a")
	waitUntil(t, "agent-a holds the lease", 10*time.Second, func() bool { return a.Fence().Active })
	tg := sitelink.BMCTarget{Driver: "redfish", Address: srv.URL, Credential: "bmc/m1"}
	ctx := context.Background()
	record := func(id string) bmc.ClaimRecord {
		t.Helper()
		rec, _, err := l.plane.Claims().Store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	runID := func(body sitelink.BMCCommand) (string, sitelink.BMCResult) {
		t.Helper()
		body.Target = tg
		id, err := l.plane.BMC(bmcSite, sitelink.KindBMCStorage, body)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := l.plane.WaitBMC(wctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return id, res
	}

	id, res := runID(sitelink.BMCCommand{StorageAction: "create-volume", RAIDType: "RAID1", Drives: []string{"Disk.0", "Disk.1"}, VolumeName: "os"})
	if res.Status != sitelink.StatusOK || res.Volume == nil || res.Volume.ID == "" || res.Volume.RAIDType != "RAID1" ||
		!slices.Equal(res.Volume.Drives, []string{"Disk.0", "Disk.1"}) {
		t.Fatalf("create-volume: %+v (volume %+v), want ok with the volume read back", res, res.Volume)
	}
	if rec := record(id); rec.State != bmc.ClaimReported || rec.Node != "agent-a" {
		t.Errorf("create-volume's claim record %+v, want reported by agent-a", rec)
	}
	id, res = runID(sitelink.BMCCommand{StorageAction: "erase-drive", Drives: []string{"Disk.2"}})
	if res.Status != sitelink.StatusOK {
		t.Fatalf("erase-drive: %+v", res)
	}
	if rec := record(id); rec.State != bmc.ClaimReported || rec.Node != "agent-a" {
		t.Errorf("erase-drive's claim record %+v, want reported by agent-a", rec)
	}
	if got, want := srv.Erasures(), []string{srv.StoragePath() + "/Drives/Disk.2"}; !slices.Equal(got, want) {
		t.Errorf("erased %q, want %q", got, want)
	}
	id, res = runID(sitelink.BMCCommand{})
	if res.Status != sitelink.StatusOK || len(res.Disks) == 0 {
		t.Errorf("listing: %+v, want the disks", res)
	}
	if rec := record(id); rec.State != bmc.ClaimIssued {
		t.Errorf("the listing's claim record %+v, want issued (routed) and never claimed", rec)
	}

	// agent-a is cut off with an erase it claimed and never reported: the plane does not
	// send it to agent-b.
	b := l.agent("agent-b")
	a.link.SetCut(true)
	erase, err := l.plane.BMC(bmcSite, sitelink.KindBMCStorage, sitelink.BMCCommand{Target: tg, StorageAction: "erase-drive", Drives: []string{"Disk.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.plane.Claims().Route(ctx, erase, sitelink.KindBMCStorage, "agent-a"); err != nil || d.Action != bmc.RouteSend {
		t.Fatalf("route: %+v, %v", d, err)
	}
	if g, err := l.plane.Claims().Claim(ctx, "agent-a", bmc.ClaimRequest{ID: erase, Op: "erase-drive", Journal: "j-a"}); err != nil || !g.Granted {
		t.Fatalf("claim: %+v, %v", g, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ru, err := l.plane.WaitBMC(wctx, erase)
	if err != nil {
		t.Fatal(err)
	}
	if ru.Status != sitelink.StatusUnknown || ru.ErrorKind != "outcome-unknown" || !ru.Replayed {
		t.Errorf("claimed, unreported erase: %+v, want outcome unknown from the claim record", ru)
	}
	if got := srv.Erasures(); len(got) != 1 {
		t.Errorf("erased %q: the unreported erase was sent again", got)
	}
	_ = b
}
