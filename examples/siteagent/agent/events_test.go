package agent_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/sitelink"
)

// machineReport is the JSON of GET /debug/machines/{mac}.
type machineReport struct {
	Machine   *bootevents.Machine  `json:"machine"`
	Diagnosis bootevents.Diagnosis `json:"diagnosis"`
}

// explainMAC asks the agent's metrics listener about mac; it returns the status and the
// decoded answer.
func explainMAC(t *testing.T, a *running, mac string) (int, machineReport) {
	t.Helper()
	resp, err := http.Get("http://" + a.Addrs()["metrics"] + "/debug/machines/" + mac)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep machineReport
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotFound {
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
			t.Fatalf("/debug/machines/%s: %v", mac, err)
		}
	}
	return resp.StatusCode, rep
}

// wantDiagnosis asks about mac until the diagnosis has code (events reach the timeline as
// the components decide, a reply may precede its event) and contains each word.
func wantDiagnosis(t *testing.T, a *running, mac hwid.MAC, code string, words ...string) machineReport {
	t.Helper()
	var rep machineReport
	// a generous bound, as waitFor's: it says nothing about speed
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		st, r := explainMAC(t, a, mac.String())
		rep = r
		if st == http.StatusOK && r.Diagnosis.Code == code {
			break
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(rep, "", " ")
			t.Fatalf("diagnosis %s not reached; the last answer: %s", code, b)
		}
	}
	for _, w := range words {
		if !strings.Contains(rep.Diagnosis.Line, w) {
			t.Errorf("diagnosis %q does not say %q", rep.Diagnosis.Line, w)
		}
	}
	return rep
}

// TestExplainEndpoint: GET /debug/machines/{mac} on the metrics listener
// says why each machine did or did not boot: unknown, an arch or a UUID mismatch (the
// agent's own reasons), booted with its path, its nonce from another address, fenced.
func TestExplainEndpoint(t *testing.T) {
	h := newHarness(t)
	link := h.plane.Link()
	a, _ := h.start(t, h.config(t.TempDir()), link)

	if st, _ := explainMAC(t, a, "not-a-mac"); st != http.StatusBadRequest {
		t.Errorf("a malformed MAC: status %d, want 400", st)
	}
	st, rep := explainMAC(t, a, "52:54:00:00:09:99")
	if st != http.StatusNotFound || rep.Diagnosis.Code != bootevents.DiagNoDHCP || rep.Machine != nil {
		t.Errorf("a MAC never seen: status %d, %+v; want 404, %s", st, rep, bootevents.DiagNoDHCP)
	}

	unknown := entry(90, h.clk.Now()).MAC // no entry handed to the agent
	ipxeDHCP(a, unknown, iana.EFI_X86_64)
	wantDiagnosis(t, a, unknown, bootevents.DiagUnknown, "no boot entry")

	// A BIOS machine whose entry says x86-64 UEFI: the agent's own reason, not "declined".
	bios := entry(91, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, bios)
	if f := ipxeDHCP(a, bios.MAC, iana.INTEL_X86PC); f != "" {
		t.Fatalf("proxy DHCP answered a BIOS machine whose entry is UEFI: %q", f)
	}
	wantDiagnosis(t, a, bios.MAC, bootevents.DiagArchMismatch, "entry's arch x86-64 UEFI", "BIOS")

	// A machine whose SMBIOS UUID is not its entry's.
	other := entry(95, h.clk.Now().Add(2*time.Hour))
	other.UUID = "4c4c4544-0031-3510-8052-b4c04f4e4b32"
	h.prepare(t, a, other)
	sent := hwid.MustParseUUID("00000000-1111-2222-3333-444455556666")
	if f, _ := askPXE(a, other.MAC, "PXEClient:Arch:00007:UNDI:003010", iana.EFI_X86_64,
		dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, append([]byte{0}, sent[:]...))); f != "" {
		t.Fatalf("proxy DHCP answered a machine whose UUID is not its entry's: %q", f)
	}
	wantDiagnosis(t, a, other.MAC, bootevents.DiagUUIDMismatch, "is not its entry's "+other.UUID)

	// A good boot: DHCP as iPXE, then the script with its nonce: the path with its steps.
	good := entry(92, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, good)
	u := a.HTTPBase() + "/boot/ipxe?mac=" + good.MAC.String() + nonceParam(a, good.MAC)
	if st, body := getFrom(t, "127.0.0.1", u, http.MethodGet); st != http.StatusOK || !hasSecret(body) {
		t.Fatalf("good boot: status %d\n%s", st, body)
	}
	rep = wantDiagnosis(t, a, good.MAC, bootevents.DiagBooted, "booted", "assertion")
	stages := map[bootevents.Stage]bool{}
	for _, s := range rep.Diagnosis.Path {
		stages[s.Stage] = true
	}
	for _, s := range []bootevents.Stage{bootevents.StageBoot4011, bootevents.StageScript, bootevents.StageAssertion} {
		if !stages[s] {
			t.Errorf("the good boot's path has no %s step: %+v", s, rep.Diagnosis.Path)
		}
	}

	// The same machine's next boot (the firmware's DHCP request begins it), its nonce
	// presented from another address first.
	if _, err := askPXE(a, good.MAC, "PXEClient:Arch:00007:UNDI:003010", iana.EFI_X86_64); err != nil {
		t.Fatal(err)
	}
	u = a.HTTPBase() + "/boot/ipxe?mac=" + good.MAC.String() + nonceParam(a, good.MAC)
	if st, body := getFrom(t, "127.0.0.2", u, http.MethodGet); st != http.StatusOK || hasSecret(body) {
		t.Fatalf("another address with the machine's nonce: status %d, secret %v", st, hasSecret(body))
	}
	wantDiagnosis(t, a, good.MAC, bootevents.DiagNonceOtherAddress, "127.0.0.2", "another address")

	// Fenced: the link cut until the fence's window passed.
	fenced := entry(93, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, fenced)
	link.SetCut(true)
	h.clk.Advance(a.cfg.Lease.TTL - lease.DefaultMargin)
	waitFor(t, "fenced", func() bool { return !a.Fence().Active })
	if f := ipxeDHCP(a, fenced.MAC, iana.EFI_X86_64); f != "" {
		t.Fatalf("a fenced agent answered: %q", f)
	}
	wantDiagnosis(t, a, fenced.MAC, bootevents.DiagFenced, "does not hold the boot lease", "epoch 1")
}

// TestSyslogIntoTimeline: with boot.syslog_listen set, a console line sent
// over loopback UDP from a machine's address shows up in that machine's timeline.
func TestSyslogIntoTimeline(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.Boot.SyslogListen = cfg.Boot.HTTPListen // 127.0.0.1:0
	a, _ := h.start(t, cfg, h.plane.Link())
	if a.Addrs()["syslog"] == "" {
		t.Fatal("no syslog socket with Boot.SyslogListen set")
	}
	e := entry(94, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	if nonceParam(a, e.MAC) == "" { // answered at 127.0.0.1: the timeline learns the address
		t.Fatal("proxy DHCP did not answer")
	}
	c, err := net.Dial("udp", a.Addrs()["syslog"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, "console line in the timeline", func() bool {
		c.Write([]byte("<14>ipxe: Downloading \x1b[31mvmlinuz\x1b[0m... ok"))
		_, rep := explainMAC(t, a, e.MAC.String())
		if rep.Machine == nil {
			return false
		}
		b, ok := rep.Machine.Last()
		return ok && len(b.Console) > 0 && strings.Contains(b.Console[len(b.Console)-1].Text, "Downloading vmlinuz... ok")
	})
}

// TestExplainNamesFenceHolder: an agent fenced because another agent of its site holds the
// boot lease names that agent and its epoch, from the control plane's word.
func TestExplainNamesFenceHolder(t *testing.T) {
	h := newHarness(t)
	h.plane.Enroll("site-t", "agent-b")
	other := h.plane.Link()
	// agent-b heartbeats first (and with every beat of agent-t), so it takes the lease and
	// keeps it.
	syncB := func() {
		t.Helper()
		if _, err := other.Sync(context.Background(), sitelink.StatusReport{Site: "site-t", Node: "agent-b", Beat: 1}); err != nil {
			t.Fatal(err)
		}
	}
	syncB()
	cfg := h.config(t.TempDir())
	a, _ := h.start(t, cfg, h.plane.Link())
	e := entry(94, h.clk.Now().Add(2*time.Hour))
	h.plane.PrepareRamdisk("agent-t", []sitelink.ProxyDhcpEntry{e})
	for i := 0; len(h.plane.Pending("agent-t")) > 0; i++ {
		if i == 5 {
			t.Fatal("entry not acknowledged")
		}
		syncB()
		h.beat(t, a)
	}
	if fs := a.Fence(); fs.Active || fs.Holder != "agent-b" || fs.Epoch == 0 {
		t.Fatalf("fence %+v, want inactive, held by agent-b", fs)
	}
	if f := ipxeDHCP(a, e.MAC, iana.EFI_X86_64); f != "" {
		t.Fatalf("a fenced agent answered: %q", f)
	}
	want := "(epoch " + strconv.FormatUint(a.Fence().Epoch, 10) + " held by agent-b)"
	wantDiagnosis(t, a, e.MAC, bootevents.DiagFenced, "does not hold the boot lease", want)
}

// TestTimelineSwitch: with Boot.NoTimeline the agent keeps no timeline and hands no
// component an Events sink, yet boots the machine and counts its refusals as before;
// /debug/machines says the timeline is off. With the default, the same steps are in the
// machine's timeline.
func TestTimelineSwitch(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run("NoTimeline="+strconv.FormatBool(off), func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config(t.TempDir())
			cfg.Boot.NoTimeline = off
			a, _ := h.start(t, cfg, h.plane.Link())
			e := entry(96, h.clk.Now().Add(2*time.Hour))
			h.prepare(t, a, e)
			if st, body := get(t, scriptURL(a, e)); st != http.StatusOK || !hasSecret(body) {
				t.Fatalf("script: status %d, secret %v", st, hasSecret(body))
			}
			// A machine that is not its entry's: the agent's own refusal, counted either way.
			bios := entry(97, h.clk.Now().Add(2*time.Hour))
			h.prepare(t, a, bios)
			if f := ipxeDHCP(a, bios.MAC, iana.INTEL_X86PC); f != "" {
				t.Fatalf("answered a BIOS machine whose entry is UEFI: %q", f)
			}
			if n := a.Stats()["proxydhcp_silent_arch-mismatch"]; n != 1 {
				t.Errorf("arch mismatches counted %d, want 1", n)
			}
			st, _ := explainMAC(t, a, e.MAC.String())
			if off {
				if a.Events() != nil {
					t.Error("a timeline with Boot.NoTimeline")
				}
				if st != http.StatusServiceUnavailable {
					t.Errorf("/debug/machines with the timeline off: status %d, want 503", st)
				}
				return
			}
			m, ok := a.Events().Machine(e.MAC)
			if !ok || st != http.StatusOK {
				t.Fatalf("the machine is not in the timeline (status %d)", st)
			}
			if b, _ := m.Last(); len(b.Events) == 0 {
				t.Errorf("the machine's boot has no events: %+v", m)
			}
			wantDiagnosis(t, a, bios.MAC, bootevents.DiagArchMismatch, "BIOS")
		})
	}
}

// TestTimelineHoldsIssuerAssertion: the assertion issuer reports into the agent's
// timeline, so a booted machine's timeline holds the issuer's own assertion event (signed,
// under the lease's epoch, with how long signing took) beside the boot handler's, and
// /debug/machines names the signing (the boot handler's event names no reason).
func TestTimelineHoldsIssuerAssertion(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	e := entry(96, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	u := a.HTTPBase() + "/boot/ipxe?mac=" + e.MAC.String() + nonceParam(a, e.MAC)
	if st, body := getFrom(t, "127.0.0.1", u, http.MethodGet); st != http.StatusOK || !hasSecret(body) {
		t.Fatalf("boot script: status %d\n%s", st, body)
	}
	rep := wantDiagnosis(t, a, e.MAC, bootevents.DiagBooted, "assertion")
	b, ok := rep.Machine.Last()
	if !ok {
		t.Fatal("a booted machine without a boot")
	}
	var signed []bootevents.Event
	for _, ev := range b.Events {
		if ev.Stage == bootevents.StageAssertion && ev.Reason == assertion.IssueSigned {
			signed = append(signed, ev)
		}
	}
	if len(signed) != 1 {
		j, _ := json.MarshalIndent(b.Events, "", " ")
		t.Fatalf("%d issuer assertion events (reason %q), want 1; the boot's events:\n%s", len(signed), assertion.IssueSigned, j)
	}
	ev := signed[0]
	if ev.Outcome != bootevents.OutcomeOK || ev.MAC != e.MAC || ev.Detail != "epoch "+strconv.FormatUint(a.Fence().Epoch, 10) ||
		ev.Bytes == 0 || ev.Addr != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("issuer's assertion event = %+v; want ok, MAC %s, epoch %d, bytes, addr 127.0.0.1", ev, e.MAC, a.Fence().Epoch)
	}
}
