package bmc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
)

// The registry's rules, step by step, as a control plane and two agents use them.
func TestClaimRegistry(t *testing.T) {
	ctx := context.Background()
	reg := &bmc.ClaimRegistry{Store: &bmc.MemoryClaimStore{}}
	ja := bmc.ClaimRequest{ID: "c1", Op: "power", Journal: "journal-a"}
	jb := bmc.ClaimRequest{ID: "c1", Op: "power", Journal: "journal-b"}
	type step struct {
		what string
		do   func() (any, error)
		want any
	}
	route := func(node string) func() (any, error) {
		return func() (any, error) {
			d, err := reg.Route(ctx, "c1", "power", node)
			return d.Action, err
		}
	}
	claim := func(node string, req bmc.ClaimRequest) func() (any, error) {
		return func() (any, error) {
			g, err := reg.Claim(ctx, node, req)
			return g.Granted, err
		}
	}
	steps := []step{
		{"issued to a", route("a"), bmc.RouteSend},
		{"moved to b before anyone claimed", route("b"), bmc.RouteSend},
		{"a's late claim is refused: it moved", claim("a", ja), false},
		{"b claims", claim("b", jb), true},
		{"b's repeat (answer lost) is granted again", claim("b", jb), true},
		{"a never gets it", claim("a", ja), false},
		{"b with another journal: refused", claim("b", ja), false},
	}
	for _, s := range steps {
		got, err := s.do()
		if err != nil || got != s.want {
			t.Fatalf("%s: got %v, %v; want %v", s.what, got, err, s.want)
		}
	}
	// b lost its journal: the outcome is recorded as unknown, for good.
	if d, _ := reg.Route(ctx, "c1", "power", "a"); d.Action != bmc.RouteReuse || d.Outcome.Status != bmc.StatusUnknown {
		t.Errorf("after b lost its journal: %+v", d)
	}

	// A second command: claimed by a, then a dies before reporting.
	c2 := bmc.ClaimRequest{ID: "c2", Op: "power", Journal: "journal-a"}
	if _, err := reg.Route(ctx, "c2", "power", "a"); err != nil {
		t.Fatal(err)
	}
	if g, _ := reg.Claim(ctx, "a", c2); !g.Granted {
		t.Fatal("a's claim refused")
	}
	d, _ := reg.Route(ctx, "c2", "power", "b")
	if d.Action != bmc.RouteUnknown || d.Outcome.Status != bmc.StatusUnknown || d.Node != "a" {
		t.Errorf("claimed by a, routed to b: %+v", d)
	}
	if d, _ := reg.Route(ctx, "c2", "power", "a"); d.Action != bmc.RouteSend {
		t.Errorf("routed to its holder again: %+v (it answers from its journal)", d)
	}
	if err := reg.Report(ctx, "b", bmc.ClaimRequest{ID: "c2", Journal: "journal-b"}, bmc.Outcome{Status: bmc.StatusOK}); !errors.Is(err, bmc.ErrInvalid) {
		t.Errorf("a report from a non-holder: %v", err)
	}
	out := bmc.Outcome{Status: bmc.StatusFailed, Kind: "refused", Code: "0xcc", Message: "no"}
	for range 2 { // a repeated report is harmless
		if err := reg.Report(ctx, "a", c2, out); err != nil {
			t.Fatal(err)
		}
	}
	d, _ = reg.Route(ctx, "c2", "power", "b")
	if diff := cmp.Diff(bmc.RouteDecision{Action: bmc.RouteReuse, Node: "a", Outcome: out}, d); diff != "" {
		t.Errorf("reuse (-want +got):\n%s", diff)
	}
	if g, _ := reg.Claim(ctx, "b", bmc.ClaimRequest{ID: "c2", Journal: "journal-b"}); g.Granted || g.Outcome != out {
		t.Errorf("claim of a reported command: %+v", g)
	}
	if !errors.Is(bmc.OutcomeOf(out.Err()).Err(), bmc.ErrRefused) {
		t.Error("outcome does not keep its kind")
	}
}

// conflictStore makes every other compare-and-swap lose a race.
type conflictStore struct {
	bmc.MemoryClaimStore
	n int
}

func (s *conflictStore) CompareAndSwap(ctx context.Context, id string, old bmc.ClaimVersion, rec bmc.ClaimRecord) (bmc.ClaimVersion, error) {
	s.n++
	if s.n%2 == 1 {
		// Another writer got in first: bump the version under the reader.
		cur, v, _ := s.MemoryClaimStore.Get(ctx, id)
		if _, err := s.MemoryClaimStore.CompareAndSwap(ctx, id, v, cur); err != nil {
			return 0, err
		}
		return 0, bmc.ErrClaimConflict
	}
	return s.MemoryClaimStore.CompareAndSwap(ctx, id, old, rec)
}

func TestClaimRegistryRetriesConflicts(t *testing.T) {
	st := &conflictStore{}
	reg := &bmc.ClaimRegistry{Store: st}
	ctx := context.Background()
	if _, err := st.MemoryClaimStore.CompareAndSwap(ctx, "x", 0, bmc.ClaimRecord{ID: "x", State: bmc.ClaimIssued, Node: "a"}); err != nil {
		t.Fatal(err)
	}
	g, err := reg.Claim(ctx, "a", bmc.ClaimRequest{ID: "x", Journal: "j"})
	if err != nil || !g.Granted {
		t.Fatalf("claim under conflicts: %+v, %v", g, err)
	}
	if rec, _, _ := st.Get(ctx, "x"); rec.State != bmc.ClaimGranted {
		t.Errorf("record %+v", rec)
	}
}

func TestClaimEncodeParse(t *testing.T) {
	rec := bmc.ClaimRecord{ID: "c1", Op: "power", State: bmc.ClaimReported, Node: "a", Journal: "j",
		Outcome: bmc.Outcome{Status: bmc.StatusFailed, Kind: "refused", Code: "0xcc", Message: "Invalid data field"},
		Updated: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	b, err := bmc.EncodeClaim(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := bmc.ParseClaim(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for name, bad := range map[string]string{
		"garbage":       "{",
		"version":       `{"v":2,"id":"c","state":"issued","node":"a"}`,
		"state":         `{"v":1,"id":"c","state":"lost"}`,
		"issued nobody": `{"v":1,"id":"c","state":"issued"}`,
		"status":        `{"v":1,"id":"c","state":"reported","status":"great"}`,
		"extra":         `{"v":1,"id":"c","state":"issued","node":"a","x":1}`,
	} {
		if _, err := bmc.ParseClaim([]byte(bad)); !errors.Is(err, bmc.ErrBadClaim) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzParseClaim: a stored record that parses encodes back to bytes that parse to the same
// record.
func FuzzParseClaim(f *testing.F) {
	f.Add([]byte(`{"v":1,"id":"c1","op":"power","state":"reported","node":"a","journal":"j","status":"ok","updated":"2026-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"v":1,"id":"c1","state":"issued","node":"a"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := bmc.ParseClaim(b)
		if err != nil {
			if !errors.Is(err, bmc.ErrBadClaim) {
				t.Fatalf("error without ErrBadClaim: %v", err)
			}
			return
		}
		enc, err := bmc.EncodeClaim(rec)
		if err != nil {
			t.Fatalf("parsed record does not encode: %v", err)
		}
		again, err := bmc.ParseClaim(enc)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(rec, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

// TestDiffersOutcomeIsKept: an outcome that took effect differently keeps its status and
// what the BMC kept through OutcomeOf, Err and a claim record's stored form.
func TestDiffersOutcomeIsKept(t *testing.T) {
	err := &bmc.OpError{Driver: "redfish", Op: "set-boot", Kind: bmc.ErrDiffers, Message: "kept Continuous (asked Once)"}
	o := bmc.OutcomeOf(err)
	if o.Status != bmc.StatusDiffers || o.Kind != "differs" || !strings.Contains(o.Message, "kept Continuous") {
		t.Fatalf("OutcomeOf = %+v", o)
	}
	if back := o.Err(); !errors.Is(back, bmc.ErrDiffers) || errors.Is(back, bmc.ErrRefused) {
		t.Errorf("Err() = %v", back)
	}
	rec := bmc.ClaimRecord{ID: "cmd-1", Op: "set-boot", State: bmc.ClaimReported, Node: "a", Journal: "j", Outcome: o}
	b, err2 := bmc.EncodeClaim(rec)
	if err2 != nil {
		t.Fatal(err2)
	}
	got, err2 := bmc.ParseClaim(b)
	if err2 != nil || got.Outcome != o {
		t.Errorf("ParseClaim(%s) = %+v, %v", b, got, err2)
	}
}
