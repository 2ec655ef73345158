package sitelink_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/sitelink"
)

// Example_bmcCommands is an agent's BMC path: commands from the desired state run off the
// heartbeat in a bmc.Dispatcher, each converted with BMCOp, run by a bmc.Executor whose
// claims and credentials go over the link (BMCClient), and reported with BMCResultOf; the
// results stay pending until a report carrying them is answered.
func Example_bmcCommands() {
	ctx := context.Background()
	plane := registryPlane{reg: &bmc.ClaimRegistry{Store: &bmc.MemoryClaimStore{}}, cred: sitelink.Credential{Username: "admin", Password: "s3cret"}}
	srv := httptest.NewServer(&sitelink.Handler{Server: &fake{}, BMC: plane, Insecure: true})
	defer srv.Close()

	link := sitelink.BMCClient{Client: &sitelink.Client{Base: srv.URL, HTTPClient: srv.Client()}, Node: "agent-1"}
	done := make(chan string, 1)
	d := &bmc.Dispatcher[sitelink.BMCResult]{OnDone: func(id string) { done <- id }}
	exec := &bmc.Executor{Opener: &powerBMC{}, Credentials: link, Claims: link, OnClaim: d.OnClaim}

	c := sitelink.Command{ID: "cmd-1", Kind: sitelink.KindBMCPower, BMC: &sitelink.BMCCommand{
		Target: sitelink.BMCTarget{Driver: "fake", Address: "198.51.100.10", Credential: "bmc-1"}, Action: "cycle"}}
	d.Start(ctx, c.ID, func(ctx context.Context) sitelink.BMCResult {
		tg, op, err := sitelink.BMCOp(c, nil)
		if err != nil {
			return sitelink.NotSentResult(c, err)
		}
		return sitelink.BMCResultOf(c, exec.RunOp(ctx, c.ID, tg, op))
	})
	<-done
	report := d.Pending()
	fmt.Println(report[0].ID, report[0].Status)
	d.Delivered(report) // the control plane answered the report
	st := d.Stats()
	fmt.Println(len(d.Pending()), st.Power.OK, st.ClaimsGranted)
	d.Close()
	// Output:
	// cmd-1 ok
	// 0 1 1
}
