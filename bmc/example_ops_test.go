package bmc_test

import (
	"context"
	"fmt"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

// wireCommand is a bmc.* command as an agent's link decodes it (the fields of
// sitelink.Command and sitelink.BMCCommand; bmc does not import the link).
type wireCommand struct {
	ID, Kind string
	Target   struct{ Driver, Address, Credential string }
	// The arguments.
	Device, Mode      string
	Persistent        bool
	Action            string
	Username, NewCred string
	SHA256            string
	Components        []string
}

// An agent maps each command of its link to a typed operation and runs it on its
// Executor: the library knows which commands are destructive (journaled and claimed) and
// which driver capability carries each one out. An image URL (firmware, virtual media) is
// minted only when the operation is sent.
func ExampleParseOp() {
	srv := bmctest.NewServer(bmctest.Options{})
	defer srv.Close()
	reg := bmc.NewRegistry()
	_ = reg.Register(redfish.Name, redfish.Config{})
	exec := &bmc.Executor{Opener: reg, Journal: &bmc.MemoryJournal{},
		Credentials: bmc.CredentialsFunc(func(context.Context, string) (bmc.Credential, error) {
			return bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}, nil
		})}
	minted := 0
	ctx := context.Background()

	// The whole mapping from a command to its outcome.
	run := func(c wireCommand) bmc.Result {
		op, err := bmc.ParseOp(c.Kind, bmc.Args{Device: c.Device, Mode: c.Mode, Persistent: c.Persistent,
			Action: c.Action, Username: c.Username, NewCredential: c.NewCred, Components: c.Components,
			Image: func(context.Context) (string, error) {
				minted++ // the agent mints a cache grant for c.SHA256 here
				return srv.URL + "/images/" + c.SHA256, nil
			}})
		if err != nil {
			return bmc.Result{ID: c.ID, Outcome: bmc.NotSent(err)}
		}
		tg := bmc.TargetRef{Driver: c.Target.Driver, Address: c.Target.Address, Credential: c.Target.Credential}
		return exec.RunOp(ctx, c.ID, tg, op)
	}

	cmd := func(id, kind string) wireCommand {
		c := wireCommand{ID: id, Kind: kind}
		c.Target.Driver, c.Target.Address, c.Target.Credential = redfish.Name, srv.URL, "vault:rack1-07"
		return c
	}
	boot := cmd("c1", "bmc.boot")
	boot.Device, boot.Mode = "pxe", "uefi"
	cycle := cmd("c2", "bmc.power")
	cycle.Action = "cycle"
	sideways := cmd("c3", "bmc.power")
	sideways.Action = "sideways"
	insert := cmd("c6", "bmc.mediaInsert")
	insert.SHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	for _, c := range []wireCommand{boot, cycle, cycle, cmd("c4", "bmc.query"), cmd("c5", "bmc.storage"), sideways, insert, insert} {
		r := run(c)
		fmt.Println(c.ID, c.Kind, r.Outcome.Status, r.Outcome.Kind, "replayed:", r.Replayed)
		switch v := r.Value.(type) {
		case bmc.QueryResult:
			fmt.Println("  power:", v.Power, "uuid:", v.Inventory.UUID)
		case []bmc.Disk:
			fmt.Println("  disks:", len(v))
		}
	}
	fmt.Println("boots seen by the BMC:", len(srv.Boots()), "image URLs minted:", minted)
	// Output:
	// c1 bmc.boot ok  replayed: false
	// c2 bmc.power ok  replayed: false
	// c2 bmc.power ok  replayed: true
	// c4 bmc.query ok  replayed: false
	//   power: on uuid: 38947555-7742-3448-3784-823347823834
	// c5 bmc.storage ok  replayed: false
	//   disks: 2
	// c3 bmc.power not-sent invalid replayed: false
	// c6 bmc.mediaInsert ok  replayed: false
	// c6 bmc.mediaInsert ok  replayed: true
	// boots seen by the BMC: 1 image URLs minted: 1
}
