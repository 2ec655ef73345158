package ipxe_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
)

// `exit` must fall through (tinkerbell/tinkerbell #984; Sidero Metal's notes on UEFI boot
// order): iPXE's plain `exit` returns success and UEFI then opens its Boot Manager instead of
// the next Boot#### entry, and iPXE runs no body of a 4xx answer at all (http.c: 404 is
// ENOENT_404), so its chain fails and retries before it gives up. Every answer that gives up
// on the machine is a 2xx whose script ends in `exit 1`.
func TestQuirk_ExitMustFallThrough(t *testing.T) {
	unknown := hwid.MAC{0x52, 0x54, 0x00, 0x99, 0x99, 0x99}
	for _, tc := range []struct {
		name  string
		host  func(*fakeHost)
		path  string
		count func(ipxe.Stats) uint64
	}{
		{"unknown", nil, bootPath(unknown, hwid.UUID{}, ""), func(s ipxe.Stats) uint64 { return s.Unknown }},
		{"mismatch", func(f *fakeHost) { f.entryErr = fmt.Errorf("%w: arch", ipxe.ErrMismatch) }, bootPath(mac1, uuid1, ""), func(s ipxe.Stats) uint64 { return s.Mismatched }},
		{"unbound", func(f *fakeHost) { f.entryErr = fmt.Errorf("%w: no-nonce", ipxe.ErrUnbound) }, bootPath(mac1, uuid1, ""), func(s ipxe.Stats) uint64 { return s.Unbound }},
		{"ip-refused", nil, bootPath(mac1, uuid1, "192.0.2.66"), func(s ipxe.Stats) uint64 { return s.IPRefused }},
		{"uuid-refused", nil, bootPath(mac1, uuid2, ""), func(s ipxe.Stats) uint64 { return s.UUIDRefused }},
		{"bad-query", nil, ipxe.PathBoot + "?mac=zz", func(s ipxe.Stats) uint64 { return s.BadRequests }},
		{"bad-chain-query", nil, ipxe.PathChain + "?n=a%0Aexit", func(s ipxe.Stats) uint64 { return s.BadRequests }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := newFakeHost()
			if tc.host != nil {
				tc.host(host)
			}
			h, srv := serve(t, host.config())
			a := get(t, srv, http.MethodGet, tc.path)
			if a.status/100 != 2 {
				t.Errorf("status %d: iPXE would not run the script, and its chain retries and reboots", a.status)
			}
			lines := strings.Split(strings.TrimSpace(string(a.body)), "\n")
			if last := strings.TrimSpace(lines[len(lines)-1]); last != "exit 1" {
				t.Errorf("script ends %q, want \"exit 1\"\n%s", last, a.body)
			}
			for _, l := range lines {
				if f := strings.Fields(l); len(f) > 0 && f[0] == "exit" && (len(f) == 1 || f[1] == "0") {
					t.Errorf("script has %q: UEFI opens its Boot Manager on a successful exit", l)
				}
			}
			if n := tc.count(h.Stats()); n != 1 {
				t.Errorf("counted %d times, want once", n)
			}
		})
	}
}

// Local boot on purpose: a site keeps the network first in the boot order so that it keeps
// control (MAAS LP#1642298, Foreman #10207, Sidero Metal's boot-from-disk answer), and an
// entry may say "boot from the local disk", answered at once instead of making the firmware
// wait out DHCP timeouts: iPXE on BIOS boots drive 0x80 (sanboot --no-describe), on UEFI it
// exits with failure so the firmware boots its next Boot#### entry. No secret goes out.
func TestQuirk_LocalBootOnPurpose(t *testing.T) {
	host := newFakeHost()
	e := host.entries[mac1]
	e.LocalBoot = true
	host.entries[mac1] = e
	h, srv := serve(t, host.config())
	a := get(t, srv, http.MethodGet, bootPath(mac1, uuid1, "")+"&platform=pcbios&buildarch=i386")
	if a.status != http.StatusOK {
		t.Fatalf("status %d, want 200\n%s", a.status, a.body)
	}
	want := "iseq ${platform} pcbios && sanboot --no-describe --drive 0x80 || exit 1\nexit 1\n"
	if !strings.HasSuffix(string(a.body), want) {
		t.Errorf("script\n%s\nwant it to end\n%s", a.body, want)
	}
	if _, err := parseIPXE(a.body); err != nil {
		t.Errorf("not a clean script: %v", err)
	}
	if strings.Contains(string(a.body), ipxe.ParamToken) || host.tokenCalls != 0 || len(host.claims) != 0 {
		t.Errorf("a local boot got a secret: token calls %d, claims %v", host.tokenCalls, host.claims)
	}
	if st := h.Stats(); st.LocalBoots != 1 || st.Scripts != 0 {
		t.Errorf("stats %+v, want LocalBoots 1", st)
	}
	// The machine's own checks still hold: another machine's UUID gets the exit script.
	if a := get(t, srv, http.MethodGet, bootPath(mac1, uuid2, "")); strings.Contains(string(a.body), "sanboot") {
		t.Errorf("a refused request got the local boot script\n%s", a.body)
	}
}

// `exit` must fall through, past a fenced agent's wait too (tinkerbell/tinkerbell #984): a
// fenced agent answers 503, whose body iPXE does not run, and no Retry-After (iPXE would ask
// again for ever). The chain script's back-off is the wait, so an agent that takes over
// within it still boots the machine from the network; after it the chain script runs
// `exit 1`, as the fenced body does after its own wait, never `reboot`, which would bring
// the machine back to the same fenced answer for as long as no agent is active (where the
// site's DHCP server names the chain URL). e2e TestE2E_OVMFFencedFallsThrough shows OVMF
// booting its disk after it.
func TestQuirk_FencedGivesUpWithExit1(t *testing.T) {
	host := newFakeHost()
	host.active = false
	h, srv := serve(t, host.config())
	chain := get(t, srv, http.MethodGet, ipxe.PathChain+"?n=n0nce")
	fenced := get(t, srv, http.MethodGet, bootPath(mac1, uuid1, ""))
	if fenced.status != http.StatusServiceUnavailable || fenced.header.Get("Retry-After") != "" {
		t.Errorf("fenced answer %d, Retry-After %q; want 503 without it", fenced.status, fenced.header.Get("Retry-After"))
	}
	for name, a := range map[string]answer{"chain script": chain, "fenced script": fenced} {
		lines := strings.Split(strings.TrimSpace(string(a.body)), "\n")
		if last := lines[len(lines)-1]; last != "exit 1" {
			t.Errorf("the %s ends %q, want \"exit 1\"\n%s", name, last, a.body)
		}
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "reboot" {
				t.Errorf("the %s reboots:\n%s", name, a.body)
			}
		}
	}
	if !strings.Contains(string(chain.body), "sleep 8\n") || !strings.Contains(string(fenced.body), "sleep 10\n") {
		t.Errorf("the waits are not the settings' (back-off 2, 4, 8 s; fenced delay 10 s):\n%s\n%s", chain.body, fenced.body)
	}
	if st := h.Stats(); st.Fenced != 1 {
		t.Errorf("fenced answers counted %d, want 1", st.Fenced)
	}
}
