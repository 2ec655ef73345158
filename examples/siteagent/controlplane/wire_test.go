package controlplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/google/go-cmp/cmp"
)

// The agent speaks sitelink's types over sitelink.Client; the wire must not have changed in
// the move. testdata/wire holds the bytes the agent's HTTPLink sent (and the control plane's
// answer) while the agent still had its own Go types for the same messages: the agent must
// send those very bytes today, and sitelink must decode and re-encode them unchanged.

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

// agentReport is an sitelink.StatusReport with every field set.
func agentReport() sitelink.StatusReport {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 123456789, zone)
	return sitelink.StatusReport{
		Site: "site-a", Node: "agent-1", Beat: 1 << 40,
		Discovered: []sitelink.DiscoveredMachine{
			{MAC: "52:54:00:00:00:09", ProductUUID: "4c4c4544-0051-3510-8057-b7c04f4b3232", Arch: "x86-64-efi", FirstSeen: t0, LastSeen: t0.Add(time.Minute), Count: 3, Relay: "192.0.2.1"},
			{MAC: "52:54:00:00:00:0a", FirstSeen: t0.UTC(), LastSeen: t0.UTC(), Count: 1},
		},
		DiscoveredDigest: "d1g3st",
		Images: []sitelink.ImageReport{
			{SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Format: "kernel", State: "ready", Bytes: 1 << 30},
			{SHA256: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", State: "failed", Reason: "digest mismatch"},
		},
		Counters: map[string]uint64{"proxydhcp_answers": 12, "tftp_bytes": 1 << 50},
		Acked:    []string{"cmd-1", "cmd-2"},
		BMC: []sitelink.BMCResult{
			{ID: "b1", Kind: sitelink.KindBMCQuery, Status: "ok", Power: "on", Inventory: &sitelink.BMCInventory{
				UUID: "4c4c4544-0051-3510-8057-b7c04f4b3232", Manufacturer: "Contoso", Model: "M1", Serial: "S1", NICsKnown: true,
				MACs: []string{"52:54:00:00:00:01"}, HostAddrs: []string{"192.0.2.10"}, BMCAddrs: []string{"198.51.100.10"}, BMCMAC: "52:54:00:00:01:01", Failed: []string{"nics"}}},
			{ID: "b2", Kind: sitelink.KindBMCStorage, Status: "ok", Disks: []sitelink.Disk{{Name: "Disk 0", Model: "SSD", Serial: "X", CapacityBytes: 960197124096, Controller: "RAID.1", Health: "OK"}, {}}},
			{ID: "b3", Kind: sitelink.KindBMCFirmware, Status: "failed", ErrorKind: "refused", Code: "400 Base.1.8.ActionNotSupported", Message: "no", Firmware: &sitelink.FirmwareResult{Task: "7", State: "Exception", Messages: []string{"rejected"}}},
			{ID: "b4", Kind: sitelink.KindBMCFirmware, Status: "unknown", Replayed: true, Firmware: &sitelink.FirmwareResult{}},
			{ID: "b5", Kind: sitelink.KindBMCPower, Status: "not-sent", ErrorKind: "invalid"},
		},
	}
}

// agentDesired is an sitelink.SyncResponse with every kind of command.
func agentDesired() sitelink.SyncResponse {
	yes, no := true, false
	na := time.Date(2026, 12, 4, 12, 0, 0, 5, zone)
	return sitelink.SyncResponse{SiteSpec: sitelink.SiteSpec{
		Lease: sitelink.BootLeaseState{Holds: true, Epoch: 7, TTLMs: 15000, Beat: 1 << 40},
		CacheImages: []sitelink.CacheImage{
			{URL: "https://images.example/vmlinuz", SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Format: "kernel"},
			{URL: "https://images.example/x.iso", SHA256: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"},
		}},
		Commands: []sitelink.Command{
			{ID: "cmd-1", Kind: sitelink.KindPrepareRamdisk, Entries: []sitelink.ProxyDhcpEntry{
				{MAC: hwid.MustParseMAC("52:54:00:00:00:01"), UUID: "4c4c4544-0051-3510-8057-b7c04f4b3232", Arch: sitelink.ArchX86UEFI, Workflow: "wf-1", NotAfter: na, TokenRef: "tok-1", SecureBoot: &yes},
				{MAC: hwid.MustParseMAC("52:54:00:00:00:02"), Arch: sitelink.ArchBIOS, Workflow: "wf-1", NotAfter: na.UTC(), SanbootSHA256: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", SecureBoot: &no},
			}},
			{ID: "cmd-2", Kind: sitelink.KindCleanUp, Workflow: "wf-0", MACs: []hwid.MAC{hwid.MustParseMAC("52:54:00:00:00:03")}},
			{ID: "bmc-1", Kind: sitelink.KindBMCBoot, BMC: &sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: "redfish", Address: "https://198.51.100.10", Credential: "bmc-1",
				CertSHA256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae", Insecure: true}, Device: "pxe", Mode: "uefi", Persistent: true}},
			{ID: "bmc-2", Kind: sitelink.KindBMCRotate, BMC: &sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: "ipmi", Address: "198.51.100.11:623", Credential: "bmc-2"}, Username: "ADMIN", NewCredential: "bmc-2-next"}},
			{ID: "bmc-3", Kind: sitelink.KindBMCFirmware, BMC: &sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: "redfish", Address: "198.51.100.12", Credential: "bmc-3"},
				SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Components: []string{"BMC", "BIOS"}, Action: "on"}},
		},
	}
}

// golden returns a file of testdata/wire.
func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "wire", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenBody returns the bytes the agent sent as its i-th request to path before the move,
// nil for a request that was not captured (the first claim report).
func goldenBody(t *testing.T, path string, i int) []byte {
	t.Helper()
	name := map[string]string{sitelink.PathSync: "sync", sitelink.PathToken: "token", sitelink.PathBMCClaim: "claim",
		sitelink.PathBMCReport: "report", sitelink.PathBMCCredential: "credential"}[path]
	f := filepath.Join("testdata", "wire", fmt.Sprintf("%s-%d.json", name, i))
	if _, err := os.Stat(f); err != nil {
		return nil
	}
	return golden(t, filepath.Base(f))
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

// TestAgentWireIsSitelink: every request the agent's own link (sitelink.Client, and
// sitelink.BMCClient over it) sends decodes into sitelink's type with unknown fields
// refused and encodes back to the agent's very bytes; every answer sitelink encodes decodes
// in the agent into the value the control plane meant.
func TestAgentWireIsSitelink(t *testing.T) {
	ctx := context.Background()
	desired := agentDesired()
	// What the control plane sent before the move is what sitelink sends.
	db, _ := json.Marshal(desired)
	if want := golden(t, "sync-response.json"); !bytes.Equal(bytes.TrimSpace(want), db) {
		t.Errorf("SyncResponse bytes changed:\nbefore: %s\nnow:    %s", want, db)
	}
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
	link := &sitelink.Client{Base: srv.URL, HTTPClient: srv.Client()} // the agent's own link
	bl := sitelink.BMCClient{Client: link, Node: "agent-1"}

	report := agentReport()
	got, err := link.Sync(ctx, report)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(desired, got); diff != "" {
		t.Errorf("the agent's SyncResponse (-meant +got):\n%s", diff)
	}
	if _, err := link.Sync(ctx, sitelink.StatusReport{Site: "site-a", Node: "agent-1"}); err != nil {
		t.Fatal(err)
	}
	if tok, err := link.Token(ctx, sitelink.TokenRequest{Node: "agent-1", Workflow: "wf-1", Ref: "tok-1"}); err != nil || tok != "bcjt_tok" {
		t.Errorf("token: %q %v", tok, err)
	}
	req := bmc.ClaimRequest{ID: "bmc-1", Op: "set-boot", Journal: "j-1"}
	if g, err := bl.Claim(ctx, req); err != nil || !reflect.DeepEqual(g, grant) {
		t.Errorf("claim: %+v %v, want %+v", g, err, grant)
	}
	for _, o := range []bmc.Outcome{{Status: bmc.StatusOK}, {Status: bmc.StatusFailed, Kind: "timeout", Code: "0xc3", Message: "no answer"}} {
		if err := bl.Report(ctx, req, o); err != nil {
			t.Errorf("report: %v", err)
		}
	}
	if c, err := bl.Credential(ctx, "bmc-1"); err != nil || c != (bmc.Credential{Username: "admin", Password: "pw"}) {
		t.Errorf("credential: %v", err)
	}
	// 409 is "not ready" to the agent, as sitelink says.
	rec.answers[sitelink.PathToken] = http.StatusConflict
	if _, err := link.Token(ctx, sitelink.TokenRequest{Node: "agent-1", Workflow: "wf-1", Ref: "tok-1"}); !errors.Is(err, sitelink.ErrNotReady) {
		t.Errorf("token on 409: %v, want sitelink.ErrNotReady", err)
	}

	for path, n := range map[string]int{sitelink.PathSync: 2, sitelink.PathToken: 2, sitelink.PathBMCClaim: 1, sitelink.PathBMCReport: 2, sitelink.PathBMCCredential: 1} {
		if len(rec.bodies[path]) != n {
			t.Fatalf("%s: %d requests, want %d", path, len(rec.bodies[path]), n)
		}
		for i, b := range rec.bodies[path] {
			if g := goldenBody(t, path, i); g != nil && !bytes.Equal(g, b) {
				t.Errorf("%s #%d: the agent's bytes changed:\nbefore: %s\nnow:    %s", path, i, g, b)
			}
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
