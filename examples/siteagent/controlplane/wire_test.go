package controlplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/google/go-cmp/cmp"
)

// The agent still speaks in its own Go types; sitelink must carry exactly its bytes, so that
// the agent can switch to sitelink without changing the wire. These tests send what the
// agent's own HTTPLink sends and check it byte for byte against sitelink's encoding.

// strict decodes b into a new value of out's type, refusing unknown fields and trailing data.
func strict(t *testing.T, b []byte, out any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("decode %s into %T: %v", b, out, err)
	}
	if dec.More() {
		t.Fatalf("trailing data after %T", out)
	}
}

// sameBytes re-encodes b through a value of type T (decoded strictly) and checks the bytes
// do not change; it returns that value.
func sameBytes[T any](t *testing.T, what string, b []byte) T {
	t.Helper()
	var v T
	strict(t, b, &v)
	back, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(b), back) {
		t.Errorf("%s: the agent's bytes and sitelink's differ:\nagent:    %s\nsitelink: %s", what, b, back)
	}
	return v
}

var zone = time.FixedZone("", 3600)

// agentReport is an agent.Report with every field set.
func agentReport() agent.Report {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 123456789, zone)
	return agent.Report{
		Site: "site-a", Node: "agent-1", Beat: 1 << 40,
		Discovered: []agent.Discovered{
			{MAC: "52:54:00:00:00:09", ProductUUID: "4c4c4544-0051-3510-8057-b7c04f4b3232", Arch: "x86-64-efi", FirstSeen: t0, LastSeen: t0.Add(time.Minute), Count: 3, Relay: "192.0.2.1"},
			{MAC: "52:54:00:00:00:0a", FirstSeen: t0.UTC(), LastSeen: t0.UTC(), Count: 1},
		},
		DiscoveredDigest: "d1g3st",
		Images: []agent.ImageReport{
			{SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Format: "kernel", State: "ready", Bytes: 1 << 30},
			{SHA256: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", State: "failed", Reason: "digest mismatch"},
		},
		Counters: map[string]uint64{"proxydhcp_answers": 12, "tftp_bytes": 1 << 50},
		Acked:    []string{"cmd-1", "cmd-2"},
		BMC: []agent.BMCResult{
			{ID: "b1", Kind: agent.CommandBMCQuery, Status: "ok", Power: "on", Inventory: &agent.BMCInventory{
				UUID: "4c4c4544-0051-3510-8057-b7c04f4b3232", Manufacturer: "Contoso", Model: "M1", Serial: "S1", NICsKnown: true,
				MACs: []string{"52:54:00:00:00:01"}, HostAddrs: []string{"192.0.2.10"}, BMCAddrs: []string{"198.51.100.10"}, BMCMAC: "52:54:00:00:01:01", Failed: []string{"nics"}}},
			{ID: "b2", Kind: agent.CommandBMCStorage, Status: "ok", Disks: []bmc.Disk{{Name: "Disk 0", Model: "SSD", Serial: "X", CapacityBytes: 960197124096, Controller: "RAID.1", Health: "OK"}, {}}},
			{ID: "b3", Kind: agent.CommandBMCFirmware, Status: "failed", ErrorKind: "refused", Code: "400 Base.1.8.ActionNotSupported", Message: "no", Firmware: &bmc.FirmwareResult{Task: "7", State: "Exception", Messages: []string{"rejected"}}},
			{ID: "b4", Kind: agent.CommandBMCFirmware, Status: "unknown", Replayed: true, Firmware: &bmc.FirmwareResult{}},
			{ID: "b5", Kind: agent.CommandBMCPower, Status: "not-sent", ErrorKind: "invalid"},
		},
	}
}

// agentDesired is an agent.Desired with every kind of command.
func agentDesired() agent.Desired {
	yes, no := true, false
	na := time.Date(2026, 12, 4, 12, 0, 0, 5, zone)
	return agent.Desired{
		Lease: agent.LeaseWord{Holds: true, Epoch: 7, TTLMs: 15000, Beat: 1 << 40},
		CacheImages: []agent.Image{
			{URL: "https://images.example/vmlinuz", SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Format: "kernel"},
			{URL: "https://images.example/x.iso", SHA256: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"},
		},
		Commands: []agent.Command{
			{ID: "cmd-1", Kind: agent.CommandPrepare, Entries: []agent.Entry{
				{MAC: hwid.MustParseMAC("52:54:00:00:00:01"), UUID: "4c4c4544-0051-3510-8057-b7c04f4b3232", Arch: agent.ArchX86UEFI, Workflow: "wf-1", NotAfter: na, TokenRef: "tok-1", SecureBoot: &yes},
				{MAC: hwid.MustParseMAC("52:54:00:00:00:02"), Arch: agent.ArchBIOS, Workflow: "wf-1", NotAfter: na.UTC(), SanbootSHA256: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", SecureBoot: &no},
			}},
			{ID: "cmd-2", Kind: agent.CommandCleanUp, Workflow: "wf-0", MACs: []hwid.MAC{hwid.MustParseMAC("52:54:00:00:00:03")}},
			{ID: "bmc-1", Kind: agent.CommandBMCBoot, BMC: &agent.BMCCommand{Target: agent.BMCTarget{Driver: "redfish", Address: "https://198.51.100.10", Credential: "bmc-1",
				CertSHA256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae", Insecure: true}, Device: "pxe", Mode: "uefi", Persistent: true}},
			{ID: "bmc-2", Kind: agent.CommandBMCRotate, BMC: &agent.BMCCommand{Target: agent.BMCTarget{Driver: "ipmi", Address: "198.51.100.11:623", Credential: "bmc-2"}, Username: "ADMIN", NewCredential: "bmc-2-next"}},
			{ID: "bmc-3", Kind: agent.CommandBMCFirmware, BMC: &agent.BMCCommand{Target: agent.BMCTarget{Driver: "redfish", Address: "198.51.100.12", Credential: "bmc-3"},
				SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Components: []string{"BMC", "BIOS"}, Action: "on"}},
		},
	}
}

// recorder is a control plane that records the agent's request bodies and answers with
// sitelink-encoded bodies.
type recorder struct {
	mu      sync.Mutex
	bodies  map[string][][]byte
	answers map[string]any // by path; an int answers that status with a sitelink.Error
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.bodies[r.URL.Path] = append(rec.bodies[r.URL.Path], b)
	a := rec.answers[r.URL.Path]
	rec.mu.Unlock()
	w.Header().Set("Content-Type", sitelink.ContentType)
	if st, ok := a.(int); ok {
		w.WriteHeader(st)
		json.NewEncoder(w).Encode(sitelink.Error{Code: "not-ready"})
		return
	}
	json.NewEncoder(w).Encode(a)
}

// TestAgentWireIsSitelink: every request the agent's HTTPLink sends decodes into sitelink's
// type with unknown fields refused and encodes back to the agent's very bytes; every answer
// sitelink encodes decodes in the agent into the value the control plane meant.
func TestAgentWireIsSitelink(t *testing.T) {
	ctx := context.Background()
	desired := agentDesired()
	// What today's control plane sends is what sitelink sends.
	db, _ := json.Marshal(desired)
	spec := sameBytes[sitelink.SyncResponse](t, "SyncResponse", db)
	grant := bmc.Grant{Granted: false, State: bmc.ClaimReported, Node: "agent-2", Outcome: bmc.Outcome{Status: bmc.StatusOK, Kind: "k", Code: "c", Message: "m"}}
	gb, _ := json.Marshal(grant)
	sgrant := sameBytes[sitelink.Grant](t, "Grant", gb)

	rec := &recorder{bodies: map[string][][]byte{}, answers: map[string]any{
		sitelink.PathSync:          spec,
		sitelink.PathToken:         sitelink.TokenResponse{Token: "bcjt_tok"},
		sitelink.PathBMCClaim:      sgrant,
		sitelink.PathBMCReport:     sitelink.Empty{},
		sitelink.PathBMCCredential: sitelink.Credential{Username: "admin", Password: "pw"},
	}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	link := &agent.HTTPLink{Base: srv.URL, Client: srv.Client()}

	report := agentReport()
	got, err := link.Sync(ctx, report)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(desired, got); diff != "" {
		t.Errorf("the agent's Desired from sitelink's SyncResponse (-meant +got):\n%s", diff)
	}
	if _, err := link.Sync(ctx, agent.Report{Site: "site-a", Node: "agent-1"}); err != nil {
		t.Fatal(err)
	}
	if tok, err := link.Token(ctx, "agent-1", "wf-1", "tok-1"); err != nil || tok != "bcjt_tok" {
		t.Errorf("token: %q %v", tok, err)
	}
	req := bmc.ClaimRequest{ID: "bmc-1", Op: "set-boot", Journal: "j-1"}
	if g, err := link.Claim(ctx, "agent-1", req); err != nil || !reflect.DeepEqual(g, grant) {
		t.Errorf("claim: %+v %v, want %+v", g, err, grant)
	}
	for _, o := range []bmc.Outcome{{Status: bmc.StatusOK}, {Status: bmc.StatusFailed, Kind: "timeout", Code: "0xc3", Message: "no answer"}} {
		if err := link.ReportClaim(ctx, "agent-1", req, o); err != nil {
			t.Errorf("report: %v", err)
		}
	}
	if c, err := link.Credential(ctx, "agent-1", "bmc-1"); err != nil || c != (bmc.Credential{Username: "admin", Password: "pw"}) {
		t.Errorf("credential: %v", err)
	}
	// 409 is "not ready" to the agent, as sitelink says.
	rec.answers[sitelink.PathToken] = http.StatusConflict
	if _, err := link.Token(ctx, "agent-1", "wf-1", "tok-1"); !errors.Is(err, agent.ErrTokenNotReady) {
		t.Errorf("token on 409: %v, want agent.ErrTokenNotReady", err)
	}

	for path, n := range map[string]int{sitelink.PathSync: 2, sitelink.PathToken: 2, sitelink.PathBMCClaim: 1, sitelink.PathBMCReport: 2, sitelink.PathBMCCredential: 1} {
		if len(rec.bodies[path]) != n {
			t.Fatalf("%s: %d requests, want %d", path, len(rec.bodies[path]), n)
		}
		for _, b := range rec.bodies[path] {
			switch path {
			case sitelink.PathSync:
				sameBytes[sitelink.StatusReport](t, path, b)
			case sitelink.PathToken:
				q := sameBytes[sitelink.TokenRequest](t, path, b)
				if q != (sitelink.TokenRequest{Node: "agent-1", Workflow: "wf-1", Ref: "tok-1"}) {
					t.Errorf("token request %+v", q)
				}
			case sitelink.PathBMCClaim, sitelink.PathBMCReport:
				q := sameBytes[sitelink.ClaimRequest](t, path, b)
				if (q.Outcome != nil) != (path == sitelink.PathBMCReport) || q.ID != req.ID || q.Journal != req.Journal || q.Op != req.Op || q.Node != "agent-1" {
					t.Errorf("%s: %+v", path, q)
				}
			case sitelink.PathBMCCredential:
				if q := sameBytes[sitelink.CredentialRequest](t, path, b); q != (sitelink.CredentialRequest{Node: "agent-1", Ref: "bmc-1"}) {
					t.Errorf("credential request %+v", q)
				}
			}
		}
	}
	// The full report carried every field.
	var r sitelink.StatusReport
	strict(t, rec.bodies[sitelink.PathSync][0], &r)
	if len(r.BMC) != 5 || r.BMC[1].Disks[0].CapacityBytes != 960197124096 || r.BMC[2].Firmware.Messages[0] != "rejected" || r.Counters["tftp_bytes"] != 1<<50 {
		t.Errorf("the report decoded into sitelink lost fields: %+v", r)
	}
}

// TestEntryValidateAgrees: sitelink's ProxyDhcpEntry.Validate accepts and refuses what the
// agent's Entry.Validate does, so the agent can adopt it.
func TestEntryValidateAgrees(t *testing.T) {
	yes, no := true, false
	na := time.Now().Add(time.Hour)
	mac := hwid.MustParseMAC("52:54:00:00:00:01")
	sha := "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
	for _, e := range []agent.Entry{
		{MAC: mac, Arch: agent.ArchX86UEFI, Workflow: "wf-1", NotAfter: na},
		{MAC: mac, UUID: "4c4c4544-0051-3510-8057-b7c04f4b3232", Arch: agent.ArchARM64EFI, Workflow: "a:b.c_d-e", NotAfter: na, TokenRef: "tok-1"},
		{MAC: mac, Arch: agent.ArchBIOS, Workflow: "wf", NotAfter: na, SanbootSHA256: sha, SecureBoot: &no},
		{MAC: mac, Arch: agent.ArchX86UEFI, Workflow: "wf", NotAfter: na, SecureBoot: &yes},
		{Arch: agent.ArchX86UEFI, Workflow: "wf", NotAfter: na},
		{MAC: mac, UUID: "4C4C4544-0051-3510-8057-B7C04F4B3232", Arch: agent.ArchX86UEFI, Workflow: "wf", NotAfter: na},
		{MAC: mac, Arch: "X86_64_efi", Workflow: "wf", NotAfter: na},
		{MAC: mac, Arch: agent.ArchX86UEFI, Workflow: "-wf", NotAfter: na},
		{MAC: mac, Arch: agent.ArchX86UEFI, Workflow: string(make([]byte, 129)), NotAfter: na},
		{MAC: mac, Arch: agent.ArchX86UEFI, Workflow: "wf"},
		{MAC: mac, Arch: agent.ArchX86UEFI, Workflow: "wf", NotAfter: na, TokenRef: "tok/1"},
		{MAC: mac, Arch: agent.ArchX86UEFI, Workflow: "wf", NotAfter: na, SanbootSHA256: sha[:63]},
		{MAC: mac, Arch: agent.ArchBIOS, Workflow: "wf", NotAfter: na, SecureBoot: &yes},
		{MAC: mac, Arch: agent.ArchX86UEFI, Workflow: "wf", NotAfter: na, SanbootSHA256: sha, SecureBoot: &yes},
	} {
		b, _ := json.Marshal(e)
		var s sitelink.ProxyDhcpEntry
		strict(t, b, &s)
		agentOK, linkOK := e.Validate() == nil, s.Validate() == nil
		if agentOK != linkOK {
			t.Errorf("%s: the agent says valid=%v, sitelink valid=%v", b, agentOK, linkOK)
		}
	}
}
