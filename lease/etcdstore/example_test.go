package etcdstore_test

import (
	"context"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/lease/etcdstore"
)

// Example runs the boot-lease controller and the BMC claim registry of a control plane on
// etcd. It needs an etcd at
// 127.0.0.1:2379, so it is compiled but not run by go test.
func Example() {
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	reg := &etcdstore.Register{Client: client}
	var fleet lease.Fleet // the host's own: its sites and its agents' sessions
	ctl := &lease.Controller{
		Store: &lease.RegisterStore{Register: reg},
		Fleet: fleet,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = ctl.Run(ctx) }()

	// The assertion verifier's lease check, on the same store.
	checker := &lease.Checker{Store: &lease.RegisterStore{Register: reg}}

	// The BMC claim registry, on the same register under its own prefix.
	claims := &bmc.ClaimRegistry{Store: &bmc.RegisterClaimStore{Register: reg}}
	_, _ = claims.Route(ctx, "cmd-1", "power", "agent-a")
	_ = checker.CheckEpoch(ctx, "fsn1", "agent-a", 1)
}
