package agent_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/lease"
)

// TestEntryUUIDInAnySpelling (S3, S2, A2): whichever of the UUID's three spellings the entry
// holds and whichever the machine reports (option 97, then iPXE's ${uuid}), proxy DHCP
// answers, the script carries the secrets, and its assertion, which holds the entry's
// spelling, verifies for a machine that reports any of the three.
func TestEntryUUIDInAnySpelling(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	u := hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	names := []string{"as given", "smbios", "reversed"}
	var entries [3]struct {
		mac  hwid.MAC
		uuid hwid.UUID
	}
	for i, sp := range u.Spellings() {
		e := entry(40+i, h.clk.Now().Add(2*time.Hour)) // X86_64_EFI
		e.UUID = sp.String()
		h.prepare(t, a, e)
		entries[i].mac, entries[i].uuid = e.MAC, sp
	}
	verifier := func() *assertion.Verifier {
		return &assertion.Verifier{
			Keys: assertion.StaticKeys{"agent-t": {PublicKey: h.key.Public().(ed25519.PublicKey), Site: "site-t", Role: assertion.RoleSite}},
			Leases: assertion.LeaseCheckerFunc(func(ctx context.Context, site, agent string, epoch uint64) error {
				rec, err := h.plane.LeaseRecord(ctx, site)
				if err != nil || rec.Holder != agent || rec.Epoch != epoch {
					return lease.ErrStaleEpoch
				}
				return nil
			}),
			Replay: &assertion.MemoryReplayCache{},
			Clock:  h.clk,
		}
	}
	for i, e := range entries {
		for j, reported := range u.Spellings() {
			t.Run("entry "+names[i]+", machine "+names[j], func(t *testing.T) {
				chain, err := askPXE(a, e.mac, "PXEClient:Arch:00007:UNDI:003010", iana.EFI_X86_64,
					dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
					dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, append([]byte{0}, reported[:]...)))
				if err != nil {
					t.Fatal(err)
				}
				if chain == "" {
					t.Fatalf("proxy DHCP silent for option 97 %s against the entry's %s", reported, e.uuid)
				}
				st, body := get(t, a.HTTPBase()+"/boot/ipxe?mac="+e.mac.String()+"&n="+nonceOf(chain)+"&uuid="+reported.String())
				if st != http.StatusOK {
					t.Fatalf("script for uuid %s against the entry's %s: status %d\n%s", reported, e.uuid, st, body)
				}
				text := scriptParam(body, "bc.assertion")
				s, err := assertion.Decode(text)
				if err != nil {
					t.Fatalf("assertion %q: %v\n%s", text, err, body)
				}
				if s.Assertion.UUID != e.uuid {
					t.Errorf("asserted UUID %s, want the entry's %s", s.Assertion.UUID, e.uuid)
				}
				for k, joined := range u.Spellings() {
					if _, err := verifier().Verify(context.Background(), text, assertion.Join{Site: "site-t", MACs: []hwid.MAC{e.mac}, UUID: joined}); err != nil {
						t.Errorf("the assertion for a machine reporting its UUID %s (%s): %v", joined, names[k], err)
					}
				}
			})
		}
	}
	if n := a.Stats()["proxydhcp_silent_uuid-mismatch"] + a.Stats()["boot_uuid-mismatch"]; n != 0 {
		t.Errorf("%d UUID mismatches counted, want none", n)
	}
}

// scriptParam returns the value of a kernel parameter name=value in a script, unquoted and
// unescaped as the kernel would see it; "" when absent.
func scriptParam(script, name string) string {
	for _, w := range strings.Fields(script) {
		if v, ok := strings.CutPrefix(w, name+"="); ok {
			if s, err := url.PathUnescape(strings.Trim(v, `'"`)); err == nil {
				return s
			}
			return v
		}
	}
	return ""
}
