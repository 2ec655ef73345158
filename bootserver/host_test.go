package bootserver_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/sitelink"
)

// tokenLink answers Token from a map and records the requests.
type tokenLink struct {
	tokens map[string]string
	asked  []sitelink.TokenRequest
	err    error
}

func (l *tokenLink) Token(_ context.Context, q sitelink.TokenRequest) (string, error) {
	l.asked = append(l.asked, q)
	if l.err != nil {
		return "", l.err
	}
	t, ok := l.tokens[q.Ref]
	if !ok {
		return "", sitelink.ErrNotReady
	}
	return t, nil
}

// TestTokens: a token is asked in the node's name for the entry's workflow and
// reference; an entry with no reference, and a token the control plane has not made yet,
// are ipxe.ErrNotReady; any other error is the link's.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	link := &tokenLink{tokens: map[string]string{"tok-1": "bearer-1"}}
	tokens := bootserver.Tokens(link, "agent-1")
	entry := func(ref string) ipxe.Entry {
		return ipxe.Entry{Ref: sitelink.ParsedEntry{ProxyDhcpEntry: sitelink.ProxyDhcpEntry{Workflow: "wf-1", TokenRef: ref}}}
	}
	if got, err := tokens(ctx, entry("tok-1")); err != nil || got != "bearer-1" {
		t.Errorf("token: %q, %v", got, err)
	}
	if want := (sitelink.TokenRequest{Node: "agent-1", Workflow: "wf-1", Ref: "tok-1"}); len(link.asked) != 1 || link.asked[0] != want {
		t.Errorf("asked %+v, want %+v", link.asked, want)
	}
	if _, err := tokens(ctx, entry("")); !errors.Is(err, ipxe.ErrNotReady) || len(link.asked) != 1 {
		t.Errorf("no reference: %v (asked %d times), want ErrNotReady without asking", err, len(link.asked))
	}
	if _, err := tokens(ctx, ipxe.Entry{}); !errors.Is(err, ipxe.ErrNotReady) {
		t.Errorf("an entry of another host: %v, want ErrNotReady", err)
	}
	if _, err := tokens(ctx, entry("tok-2")); !errors.Is(err, ipxe.ErrNotReady) {
		t.Errorf("not made yet: %v, want ErrNotReady", err)
	}
	link.err = errors.New("link down")
	if _, err := tokens(ctx, entry("tok-1")); !errors.Is(err, link.err) {
		t.Errorf("link error: %v", err)
	}
}

// TestDiscovered: a machine proxy DHCP did not answer, and one that asked for its script
// without an entry, are listed with what they sent.
func TestDiscovered(t *testing.T) {
	list, err := discovery.NewList(discovery.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer list.Close()
	mac1, _ := hwid.ParseMAC("52:54:00:00:00:01")
	mac2, _ := hwid.ParseMAC("52:54:00:00:00:02")
	relay := netip.MustParseAddr("192.0.2.254")
	bootserver.DiscoveredDHCP(list)(context.Background(), &proxydhcp.Request{MAC: mac1, Arch: hwid.ArchX86_64EFI, HasArch: true, Relay: relay})
	bootserver.DiscoveredHTTP(list)(ipxe.Discovery{Query: ipxe.Query{MAC: mac2}})
	got := map[hwid.MAC]discovery.Entry{}
	for _, e := range list.Snapshot().Entries {
		got[e.MAC] = e
	}
	if e, ok := got[mac1]; !ok || e.Relay != relay || e.Arch == "" {
		t.Errorf("DHCP sighting: %+v, %v", e, ok)
	}
	if _, ok := got[mac2]; !ok || len(got) != 2 {
		t.Errorf("HTTP sighting missing: %+v", got)
	}
}
