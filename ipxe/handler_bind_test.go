package ipxe_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
)

const nonce = "0123456789abcdef0123456789abcdef"

// noSecret fails the test when an answer carries a token, an assertion or a grant, or when
// the host was asked for a token or a signature.
func noSecret(t *testing.T, host *fakeHost, a answer) {
	t.Helper()
	host.mu.Lock()
	defer host.mu.Unlock()
	body := string(a.body)
	if strings.Contains(body, ipxe.ParamToken) || strings.Contains(body, ipxe.ParamAssertion) || strings.Contains(body, "/cache/t/") ||
		host.tokenCalls != 0 || len(host.claims) != 0 {
		t.Errorf("a secret was handed out: token calls %d, assertions signed %d\n%s", host.tokenCalls, len(host.claims), body)
	}
}

// TestNonceCarriedThrough (S1): the boot nonce of the DHCP answer's chain URL goes into the
// chain script's /boot/ipxe URL, reaches the host with the connection's address, and stays
// in every URL a script chains to for a fresh answer (a token wait, a failed fetch), so the
// machine's retries keep it.
func TestNonceCarriedThrough(t *testing.T) {
	host := newFakeHost()
	h, srv := serve(t, host.config())

	a := get(t, srv, http.MethodGet, ipxe.PathChain+"?n="+nonce)
	if a.status != http.StatusOK {
		t.Fatalf("chain: status %d", a.status)
	}
	c := ipxe.Chain{URL: ipxe.PathBoot, Nonce: nonce}
	if err := chainShape(c).check(a.body); err != nil {
		t.Fatalf("%v\n%s", err, a.body)
	}
	if !strings.Contains(string(a.body), "&buildarch=${buildarch}&n="+nonce+" ") {
		t.Errorf("the chain script does not carry the nonce:\n%s", a.body)
	}

	again := ipxe.PathChain + "?n=" + nonce
	host.tokenErr = fmt.Errorf("pending: %w", ipxe.ErrNotReady)
	a = get(t, srv, http.MethodGet, bootPath(mac1, uuid1, "127.0.0.1")+"&n="+nonce)
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("token wait: status %d", a.status)
	}
	if diff := cmp.Diff(string(mustRender(t, ipxe.Wait{Delay: ipxe.DefaultTokenWait, URL: again})), string(a.body)); diff != "" {
		t.Errorf("the wait script loses the nonce (-want +got):\n%s", diff)
	}
	host.mu.Lock()
	host.tokenErr = nil
	host.mu.Unlock()
	a = get(t, srv, http.MethodGet, bootPath(mac1, uuid1, "127.0.0.1")+"&n="+nonce)
	if a.status != http.StatusOK {
		t.Fatalf("script: status %d\n%s", a.status, a.body)
	}
	if !strings.Contains(string(a.body), "chain --replace --autofree "+again+" ") {
		t.Errorf("the boot script's fallback loses the nonce:\n%s", a.body)
	}

	host.mu.Lock()
	queries := host.queries
	host.mu.Unlock()
	want := ipxe.Query{MAC: mac1, UUID: uuid1, IP: netip.MustParseAddr("127.0.0.1"), Nonce: nonce, Remote: netip.MustParseAddr("127.0.0.1")}
	if diff := cmp.Diff([]ipxe.Query{want, want}, queries, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("what the host saw (-want +got):\n%s", diff)
	}

	// A nonce that is not one is refused at the chain script already.
	for _, bad := range []string{"a%0Aexit", "${net0/mac}", strings.Repeat("x", ipxe.MaxNonceLen+1), "a&n=b"} {
		if a := get(t, srv, http.MethodGet, ipxe.PathChain+"?n="+bad); a.status != http.StatusOK || strings.Contains(string(a.body), "chain") {
			t.Errorf("chain.ipxe?n=%s: status %d\n%s", bad, a.status, a.body)
		}
	}
	if st := h.Stats(); st.Chains != 1 || st.BadRequests != 4 || st.TokenWaits != 1 || st.Scripts != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestUnboundGetsNoSecret (S1): a host that says the requester is not bound to the machine's
// DHCP answer (ErrUnbound: a MAC-only request, someone else's nonce) gets the exit script;
// no token is fetched and nothing is signed; counted apart, and not a discovery.
func TestUnboundGetsNoSecret(t *testing.T) {
	host := newFakeHost()
	host.entryErr = fmt.Errorf("%w: no-nonce", ipxe.ErrUnbound)
	h, srv := serve(t, host.config())
	a := get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, ""))
	if a.status != http.StatusOK {
		t.Fatalf("status %d, want 200 with the exit script", a.status)
	}
	if diff := cmp.Diff(string(mustRender(t, ipxe.Exit{})), string(a.body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	noSecret(t, host, a)
	if st := h.Stats(); st.Unbound != 1 || st.Unknown != 0 || st.Discovered != 0 || st.Errors != 0 {
		t.Errorf("stats %+v, want Unbound 1 and nothing else", st)
	}
}

// TestAssertionStatesWhatTheServerKnows (S2): the assertion's UUID is the entry's and its IP
// the connection's. A query UUID that is no spelling of the entry's, or a query IP that is
// not the connection's address, gets the exit script and no secret, whatever the host
// checked; any spelling of the entry's UUID, whichever spelling the entry holds, is asserted
// as the entry's.
func TestAssertionStatesWhatTheServerKnows(t *testing.T) {
	other := uuid1
	other[15] ^= 1
	for _, tc := range []struct {
		name      string
		entryUUID hwid.UUID // zero: the fake host's (uuid1)
		uuid      hwid.UUID
		ip        string
		status    int // 200 and the exit script for a refusal
		refused   bool
		wantUUID  hwid.UUID
	}{
		{"another machine's uuid", hwid.UUID{}, uuid2, "", http.StatusOK, true, hwid.UUID{}},
		{"another ip", hwid.UUID{}, uuid1, "192.0.2.66", http.StatusOK, true, hwid.UUID{}},
		{"the uuid as smbios spells it", hwid.UUID{}, uuid1.SMBIOS(), "127.0.0.1", http.StatusOK, false, uuid1},
		{"the uuid as ipmi prints it", hwid.UUID{}, uuid1.Reversed(), "", http.StatusOK, false, uuid1},
		{"entry in smbios order, the uuid as ipmi prints it", uuid1.SMBIOS(), uuid1.Reversed(), "", http.StatusOK, false, uuid1.SMBIOS()},
		{"entry as ipmi prints it, the uuid in smbios order", uuid1.Reversed(), uuid1.SMBIOS(), "", http.StatusOK, false, uuid1.Reversed()},
		{"entry as ipmi prints it, the uuid as given", uuid1.Reversed(), uuid1, "", http.StatusOK, false, uuid1.Reversed()},
		{"entry in smbios order, one bit from the uuid as ipmi prints it", uuid1.SMBIOS(), other.Reversed(), "", http.StatusOK, true, hwid.UUID{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := newFakeHost() // its Entries checks nothing: the handler's rule must hold alone
			if tc.entryUUID != (hwid.UUID{}) {
				e := host.entries[mac1]
				e.UUID = tc.entryUUID
				host.entries[mac1] = e
			}
			h, srv := serve(t, host.config())
			a := get(t, srv, http.MethodGet, bootPath(mac1, tc.uuid, tc.ip))
			if a.status != tc.status {
				t.Fatalf("status %d, want %d\n%s", a.status, tc.status, a.body)
			}
			st := h.Stats()
			if tc.refused {
				noSecret(t, host, a)
				if st.UUIDRefused+st.IPRefused != 1 || st.Scripts != 0 {
					t.Errorf("stats %+v", st)
				}
				return
			}
			c := decodeClaims(t, kernelLine(t, a.body))
			if c.UUID != tc.wantUUID || c.IP != netip.MustParseAddr("127.0.0.1") {
				t.Errorf("asserted UUID %s IP %s, want %s 127.0.0.1", c.UUID, c.IP, tc.wantUUID)
			}
		})
	}
}

// TestHeadSignsNothing (S2): HEAD /boot/ipxe is refused (405, Allow: GET) before any entry,
// token or signature is asked for: a script's length would need both. HEAD of the chain
// script and the files still works (UEFI HTTP boot sends HEAD before GET).
func TestHeadSignsNothing(t *testing.T) {
	host := newFakeHost()
	h, srv := serve(t, host.config())
	a := get(t, srv, http.MethodHead, bootPath(mac1, uuid1, "127.0.0.1"))
	if a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "GET" {
		t.Fatalf("HEAD /boot/ipxe: status %d, Allow %q; want 405, GET", a.status, a.header.Get("Allow"))
	}
	noSecret(t, host, a)
	host.mu.Lock()
	asked := len(host.queries)
	host.mu.Unlock()
	if asked != 0 {
		t.Errorf("the host was asked for an entry %d times", asked)
	}
	if a := get(t, srv, http.MethodHead, ipxe.PathChain); a.status != http.StatusOK {
		t.Errorf("HEAD chain.ipxe: status %d", a.status)
	}
	if st := h.Stats(); st.MethodsRefused != 1 || st.TokenFetches != 0 {
		t.Errorf("stats %+v", st)
	}
}
