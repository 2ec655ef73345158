package bmc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

// TestStorageOpsAreClaimedJournaledAndReadBack runs bmc.storage's volume and erase
// operations through an Executor with a journal and claims: each is claimed once, sent
// once, read back, and a repeat under the same id is answered without reaching the BMC;
// another agent is refused the claim.
func TestStorageOpsAreClaimedJournaledAndReadBack(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{Storage: &bmctest.StorageOptions{}})
	defer srv.Close()
	reg := bmc.NewRegistry()
	_ = reg.Register(redfish.Name, redfish.Config{PollInterval: time.Millisecond})
	creds := bmc.CredentialsFunc(func(context.Context, string) (bmc.Credential, error) {
		return bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}, nil
	})
	claims := &bmc.ClaimRegistry{Store: &bmc.MemoryClaimStore{}}
	a := &bmc.Executor{Opener: reg, Credentials: creds, Journal: &bmc.MemoryJournal{}, Claims: claims.For("agent-a")}
	b := &bmc.Executor{Opener: reg, Credentials: creds, Journal: &bmc.MemoryJournal{}, Claims: claims.For("agent-b")}
	tg := bmc.TargetRef{Driver: redfish.Name, Address: srv.URL, Credential: "site"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	posts := func() int {
		n := 0
		for _, r := range srv.Requests() {
			if r.Method != "GET" && !strings.HasPrefix(r.Path, "/redfish/v1/SessionService/Sessions") {
				n++
			}
		}
		return n
	}
	create, err := bmc.ParseOp("bmc.storage", bmc.Args{StorageAction: bmc.StorageCreateVolume, RAIDType: "RAID1",
		Drives: []string{"Disk.0", "Disk.1"}, VolumeName: "os"})
	if err != nil {
		t.Fatal(err)
	}
	r := a.RunOp(ctx, "vol-1", tg, create)
	v, ok := r.Value.(bmc.Volume)
	if r.Outcome.Status != bmc.StatusOK || !ok || v.RAIDType != "RAID1" || len(v.Drives) != 2 || r.Claim != bmc.ClaimAnswerGranted {
		t.Fatalf("create: %+v value %+v claim %q", r.Outcome, r.Value, r.Claim)
	}
	if n := posts(); n != 1 {
		t.Fatalf("%d changes sent, want 1", n)
	}
	if again := a.RunOp(ctx, "vol-1", tg, create); !again.Replayed || again.Outcome.Status != bmc.StatusOK {
		t.Errorf("repeat on the same agent: %+v replayed=%v, want the recorded outcome", again.Outcome, again.Replayed)
	}
	if other := b.RunOp(ctx, "vol-1", tg, create); other.Outcome.Status == bmc.StatusOK && !other.Replayed {
		t.Errorf("another agent sent a claimed creation again: %+v", other.Outcome)
	}
	if n := posts(); n != 1 {
		t.Errorf("%d changes sent after the repeats, want 1", n)
	}
	for id, op := range map[string]bmc.Op{
		"erase-1": bmc.EraseDrive{Drive: "Disk.3"},
		"del-1":   bmc.DeleteVolume{Controller: "RAID1", Volume: v.ID},
	} {
		if r := a.RunOp(ctx, id, tg, op); r.Outcome.Status != bmc.StatusOK || r.Claim != bmc.ClaimAnswerGranted {
			t.Errorf("%s: %+v claim %q", id, r.Outcome, r.Claim)
		}
	}
	if got := srv.Erasures(); len(got) != 1 || got[0] != srv.StoragePath()+"/Drives/Disk.3" {
		t.Errorf("erasures %q, want Disk.3", got)
	}
	if srv.Resource(srv.StoragePath()+"/Volumes/"+v.ID) != nil {
		t.Error("the volume is still there after its deletion")
	}
	// A listing under the same kind is not claimed nor journaled.
	list, _ := bmc.ParseOp("bmc.storage", bmc.Args{})
	if r := a.RunOp(ctx, "list-1", tg, list); r.Outcome.Status != bmc.StatusOK || r.Claim != "" {
		t.Errorf("list: %+v claim %q, want ok and no claim", r.Outcome, r.Claim)
	}
}

// TestStorageChangesUnsupportedOverIPMI: IPMI has no volumes; the operation is refused
// with a typed error before anything is sent.
func TestStorageChangesUnsupportedOverIPMI(t *testing.T) {
	for _, op := range []bmc.Op{
		bmc.CreateVolume{Spec: bmc.VolumeSpec{RAIDType: "RAID1", Drives: []string{"0", "1"}}},
		bmc.DeleteVolume{Volume: "1"}, bmc.EraseDrive{Drive: "0"},
	} {
		_, err := bmc.Do(context.Background(), &ipmi.Driver{}, op)
		var oe *bmc.OpError
		if !errors.Is(err, bmc.ErrUnsupported) || !errors.Is(err, bmc.ErrNoCapability) || !errors.As(err, &oe) || oe.Driver != ipmi.Name {
			t.Errorf("%s over IPMI: %v, want an *OpError of kind ErrUnsupported from the ipmi driver", op.Name(), err)
		}
	}
}
