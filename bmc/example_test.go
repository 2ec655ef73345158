package bmc_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

// A host registers the drivers it supports, opens one per machine, and asserts for the
// capabilities an operation needs. The BMC here is bmctest's fake on the DMTF mockup.
func Example() {
	srv := bmctest.NewServer(bmctest.Options{})
	defer srv.Close()

	reg := bmc.NewRegistry()
	_ = reg.Register("redfish", redfish.Config{})

	ctx := context.Background()
	d, err := reg.Open(ctx, bmc.Target{Driver: "redfish", Address: srv.URL,
		Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()

	if bc, ok := d.(bmc.BootController); ok {
		err := bc.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI})
		fmt.Println("boot override:", err)
	}
	// The control plane's request carries an operation id: a retry of the same request is
	// answered from the journal instead of cycling the machine again.
	var runner bmc.Runner
	pc := d.(bmc.PowerController)
	for range 2 {
		err := runner.Run(ctx, "req-7f3a", "power", func(ctx context.Context) error {
			return pc.SetPower(ctx, bmc.PowerActionCycle)
		})
		fmt.Println("cycle:", err)
	}
	fmt.Println("boots seen by the BMC:", srv.Boots())

	if inv, err := d.(bmc.Inspector).Inspect(ctx); err == nil {
		fmt.Println("uuid:", inv.UUID, "nics:", len(inv.NICs))
	}

	_, err = reg.Open(ctx, bmc.Target{Driver: "amt", Address: "192.0.2.10"})
	fmt.Println(errors.Is(err, bmc.ErrUnsupportedDriver))
	// Output:
	// boot override: <nil>
	// cycle: <nil>
	// cycle: <nil>
	// boots seen by the BMC: [{Pxe UEFI}]
	// uuid: 38947555-7742-3448-3784-823347823834 nics: 2
	// true
}

// An agent runs BMC operations through an Executor: credentials by reference, a journal in
// its data dir, and claims through its host, here a ClaimRegistry in the same process. A
// second agent handed the same command after a failover sends nothing and reuses the
// outcome.
func ExampleExecutor() {
	srv := bmctest.NewServer(bmctest.Options{})
	defer srv.Close()
	reg := bmc.NewRegistry()
	_ = reg.Register("redfish", redfish.Config{})
	vault := bmc.CredentialsFunc(func(_ context.Context, ref string) (bmc.Credential, error) {
		return bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}, nil
	})
	claims := &bmc.ClaimRegistry{Store: &bmc.MemoryClaimStore{}}
	var dirs []string
	defer func() {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}()
	agent := func(node string) *bmc.Executor {
		dir, _ := os.MkdirTemp("", "agent-data-") // the agent's data dir
		dirs = append(dirs, dir)
		j, err := bmc.OpenFileJournal(dir)
		if err != nil {
			panic(err)
		}
		return &bmc.Executor{Opener: reg, Credentials: vault, Journal: j, Claims: claims.For(node)}
	}
	target := bmc.TargetRef{Driver: "redfish", Address: srv.URL, Credential: "vault:bmc/rack1-07"}
	on := bmc.SetPower{Action: bmc.PowerActionOn}
	ctx := context.Background()
	d, _ := claims.Route(ctx, "cmd-42", "power", "agent-1")
	fmt.Println("route:", d.Action)
	r := agent("agent-1").RunOp(ctx, "cmd-42", target, on)
	fmt.Println("agent-1:", r.Outcome.Status, "replayed:", r.Replayed)

	d, _ = claims.Route(ctx, "cmd-42", "power", "agent-2")
	fmt.Println("after failover:", d.Action, d.Outcome.Status)
	r = agent("agent-2").RunOp(ctx, "cmd-42", target, on)
	fmt.Println("agent-2:", r.Outcome.Status, "replayed:", r.Replayed)
	// Output:
	// route: send
	// agent-1: ok replayed: false
	// after failover: reuse ok
	// agent-2: ok replayed: true
}
