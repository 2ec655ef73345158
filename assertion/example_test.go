package assertion_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
)

// An agent issues an assertion for the machine it boots; the control plane admits it once,
// and refuses it as a replay the second time.
func Example() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // the agent's node key

	// Agent side.
	issuer := &assertion.Issuer{Site: "site-fsn1", Agent: "node-agent-a", Signer: key, Clock: clocktest.New(now)}
	mac, _ := hwid.ParseMAC("3c:ec:ef:12:34:56")
	uuid, _ := hwid.ParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	text, err := issuer.Issue(ctx, assertion.Fields{
		Epoch: 7, MAC: mac, IP: netip.MustParseAddr("192.0.2.20"), UUID: uuid,
		Workflow: "wf-commission-42", NotAfter: now.Add(2 * time.Hour),
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Control-plane side.
	verifier := &assertion.Verifier{
		Keys: assertion.StaticKeys{
			"node-agent-a": {PublicKey: key.Public(), Site: "site-fsn1", Role: assertion.RoleSite},
		},
		Leases: assertion.LeaseCheckerFunc(func(ctx context.Context, site, agent string, epoch uint64) error {
			if epoch != 7 {
				return assertion.ErrStaleEpoch // the lease package's Checker answers this
			}
			if agent != "node-agent-a" {
				return assertion.ErrNotLeaseHolder
			}
			return nil
		}),
		Replay: &assertion.MemoryReplayCache{},
		Clock:  clocktest.New(now.Add(40 * time.Second)),
	}
	join := assertion.Join{Site: "site-fsn1", MACs: []hwid.MAC{mac}, UUID: uuid.SMBIOS()}
	a, err := verifier.Verify(ctx, text, join)
	fmt.Println(a.Agent, a.Epoch, a.MAC, a.Workflow, a.NotAfter.Sub(a.IssuedAt), err)

	_, err = verifier.Verify(ctx, text, join)
	var refused *assertion.RefusedError
	if errors.As(err, &refused) {
		fmt.Println("refused:", refused.Reason)
	}
	fmt.Println(assertion.ReasonOf(err) == assertion.ReasonReplay)
	// Output:
	// node-agent-a 7 3c:ec:ef:12:34:56 wf-commission-42 15m0s <nil>
	// refused: replay
	// true
}

// After a failover the old holder's assertions stop verifying, and the caller tells the
// reasons apart.
func ExampleVerifier_Verify_refusals() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	keyA := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	holder, epoch := "agent-a", uint64(7)
	verifier := &assertion.Verifier{
		Keys: assertion.StaticKeys{
			"agent-a": {PublicKey: keyA.Public(), Site: "site-1", Role: assertion.RoleSite},
		},
		Leases: assertion.LeaseCheckerFunc(func(_ context.Context, _, agent string, e uint64) error {
			switch {
			case e != epoch:
				return fmt.Errorf("%w: current epoch %d", assertion.ErrStaleEpoch, epoch)
			case agent != holder:
				return assertion.ErrNotLeaseHolder
			}
			return nil
		}),
		Replay: &assertion.MemoryReplayCache{},
		Clock:  clocktest.New(now),
	}
	issuer := &assertion.Issuer{Site: "site-1", Agent: "agent-a", Signer: keyA, Clock: clocktest.New(now)}
	mac, _ := hwid.ParseMAC("52:54:00:00:00:01")
	text, _ := issuer.Issue(ctx, assertion.Fields{Epoch: 7, MAC: mac})

	holder, epoch = "agent-b", 8 // the lease failed over
	for _, join := range []assertion.Join{
		{Site: "site-2", MACs: []hwid.MAC{mac}},
		{Site: "site-1", MACs: []hwid.MAC{mac}},
	} {
		_, err := verifier.Verify(ctx, text, join)
		switch assertion.ReasonOf(err) {
		case assertion.ReasonStaleEpoch, assertion.ReasonNotLeaseHolder:
			fmt.Println("signed by an agent that is no longer the boot server:", err)
		case assertion.ReasonUnavailable:
			fmt.Println("try again later")
		case "":
			fmt.Println("admitted")
		default:
			fmt.Println("refused:", assertion.ReasonOf(err))
		}
	}
	// Output:
	// refused: wrong-site
	// signed by an agent that is no longer the boot server: assertion: refused (stale-epoch) from agent agent-a: epoch 7: assertion: epoch is not the lease's current one: current epoch 8
}

// Decode reads a text without verifying it, for logs and debugging.
func ExampleDecode() {
	s, err := assertion.Decode("AR9zaXRlXzAxazV3M2o4cTR4djltMmM3ZDZlNWY0ZzNoH25vZGVfMDFrNXczazJhOWI4YzdkNmU1ZjRnM2gyajEAAAAAAAAAKjzs7xI0VgTAAAIUAUxMRUQAMTUQgFK0wE9OSzIdd2ZfMDFrNXczbTduNnA1cTRyM3MydDF2MHc5eDgAAAAAaaQqQAAAAABppC3EuzlRY9YpnLdX7M4rAGuhy2VRj1dYXRMC2RuAqolyiyJT9-dQsj0W8SvxfU_b2yjZfO8Ux4N-zaGV6hxTrXJ1DA")
	if err != nil {
		fmt.Println(err)
		return
	}
	a := s.Assertion
	fmt.Println(a.Site, a.Agent, a.Epoch)
	fmt.Println(a.MAC, a.IP, a.UUID, a.Workflow)
	fmt.Println(a.IssuedAt, a.NotAfter.Sub(a.IssuedAt), len(s.Payload), len(s.Signature))
	// Output:
	// site_01k5w3j8q4xv9m2c7d6e5f4g3h node_01k5w3k2a9b8c7d6e5f4g3h2j1 42
	// 3c:ec:ef:12:34:56 192.0.2.20 4c4c4544-0031-3510-8052-b4c04f4e4b32 wf_01k5w3m7n6p5q4r3s2t1v0w9x8
	// 2026-03-01 12:00:00 +0000 UTC 15m0s 147 64
}
