package sitelink_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestBMCLimitsValidate: each field out of bounds is refused as a *bmc.LimitError naming
// it (a host maps it to its own configuration's name), and the zero limits are valid.
func TestBMCLimitsValidate(t *testing.T) {
	if err := (sitelink.BMCLimits{}).Validate(); err != nil {
		t.Fatalf("zero limits: %v", err)
	}
	for _, tc := range []struct {
		field string
		l     sitelink.BMCLimits
	}{
		{"MaxConcurrent", sitelink.BMCLimits{MaxConcurrent: -1}},
		{"MaxConcurrent", sitelink.BMCLimits{MaxConcurrent: bmc.MaxMaxConcurrent + 1}},
		{"Timeout", sitelink.BMCLimits{Timeout: 2 * bmc.MaxOpTimeout}},
		{"MaxSessions", sitelink.BMCLimits{MaxSessions: -1}},
		{"SessionIdle", sitelink.BMCLimits{SessionIdle: -time.Second}},
		{"PowerOnRate", sitelink.BMCLimits{PowerOnRate: math.NaN()}},
		{"PowerOnRate", sitelink.BMCLimits{PowerOnRate: math.Inf(1)}},
		{"PowerOnBurst", sitelink.BMCLimits{PowerOnBurst: -1}},
		{"GroupPowerOnRate", sitelink.BMCLimits{GroupPowerOnRate: -0.5}},
		{"GroupPowerOnBurst", sitelink.BMCLimits{GroupPowerOnBurst: -2}},
		{"NetworkInFlight", sitelink.BMCLimits{NetworkInFlight: -1}},
		{"TransitionSettle", sitelink.BMCLimits{TransitionSettle: -time.Millisecond}},
	} {
		var le *bmc.LimitError
		if err := tc.l.Validate(); !errors.As(err, &le) || le.Field != tc.field {
			t.Errorf("%+v: %v, want a LimitError for %s", tc.l, err, tc.field)
		}
		if _, err := sitelink.NewBMCService(sitelink.BMCServiceConfig{BMCLimits: tc.l, Opener: &powerBMC{}}); err == nil {
			t.Errorf("%+v: NewBMCService took it", tc.l)
		}
	}
	var le *bmc.LimitError
	if _, err := sitelink.NewBMCService(sitelink.BMCServiceConfig{}); !errors.As(err, &le) || le.Field != "Opener" {
		t.Errorf("no Opener: %v, want a LimitError for Opener", err)
	}
}

// startService builds a BMCService over a control plane that grants every claim, and
// returns it with a channel told each command id that ended.
func startService(t *testing.T, c sitelink.BMCServiceConfig) (*sitelink.BMCService, chan string) {
	t.Helper()
	done := make(chan string, 16)
	c.OnDone = func(id string) { done <- id }
	s, err := sitelink.NewBMCService(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, done
}

func planeLink(t *testing.T) *sitelink.Client {
	t.Helper()
	plane := registryPlane{reg: &bmc.ClaimRegistry{Store: &bmc.MemoryClaimStore{}}, cred: sitelink.Credential{Username: "admin", Password: "s3cret"}}
	srv := httptest.NewServer(&sitelink.Handler{Server: &fake{}, BMC: plane, Insecure: true})
	t.Cleanup(srv.Close)
	return &sitelink.Client{Base: srv.URL, HTTPClient: srv.Client()}
}

func waitDone(t *testing.T, done chan string, id string) {
	t.Helper()
	select {
	case got := <-done:
		if got != id {
			t.Fatalf("ended %q, want %q", got, id)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not end", id)
	}
}

// TestBMCServiceResults: a command's result is pending until a report carrying it was
// delivered; a command over a service without a link is not sent; an abort of a
// transition not running yet is acknowledged and kept; a non-BMC command is left to the
// host.
func TestBMCServiceResults(t *testing.T) {
	ctx := context.Background()
	power := sitelink.Command{ID: "cmd-1", Kind: sitelink.KindBMCPower, BMC: &sitelink.BMCCommand{
		Target: sitelink.BMCTarget{Driver: "fake", Address: "198.51.100.10", Credential: "bmc-1"}, Action: "cycle"}}

	t.Run("linked", func(t *testing.T) {
		p := &powerBMC{}
		s, done := startService(t, sitelink.BMCServiceConfig{Opener: p, Link: planeLink(t), Node: "agent-1", JournalDir: t.TempDir()})
		if s.Start(ctx, sitelink.Command{ID: "b-1", Kind: sitelink.KindPrepareRamdisk}) {
			t.Error("a boot command was taken as a BMC one")
		}
		if !s.Start(ctx, power) {
			t.Fatal("bmc.power not taken")
		}
		waitDone(t, done, "cmd-1")
		res, prog := s.Pending()
		if len(res) != 1 || res[0].ID != "cmd-1" || res[0].Status != sitelink.StatusOK || len(prog) != 0 {
			t.Fatalf("pending %+v %+v, want cmd-1 ok", res, prog)
		}
		if again, _ := s.Pending(); len(again) != 1 {
			t.Errorf("undelivered result pending %d times, want still once", len(again))
		}
		s.Delivered(res)
		if again, _ := s.Pending(); len(again) != 0 {
			t.Errorf("delivered result still pending: %+v", again)
		}
		if p.sent != 1 {
			t.Errorf("BMC got %d power requests, want 1", p.sent)
		}
		got := map[string]uint64{}
		for _, x := range s.Samples() {
			got[x.Name] += x.Value
		}
		if got["bmc_journal_damaged"] != 0 || got["bmc_sessions_open"] != 1 {
			t.Errorf("samples %v: want the journal's and one session open", got)
		}
	})
	t.Run("not linked", func(t *testing.T) {
		p := &powerBMC{}
		s, done := startService(t, sitelink.BMCServiceConfig{Opener: p})
		s.Start(ctx, power)
		waitDone(t, done, "cmd-1")
		res, _ := s.Pending()
		if len(res) != 1 || res[0].Status != sitelink.StatusNotSent || res[0].ErrorKind != bmc.KindName(bmc.ErrUnsupported) || p.sent != 0 {
			t.Errorf("without a link: %+v (sent %d), want not-sent, unsupported, nothing sent", res, p.sent)
		}
	})
	t.Run("early abort", func(t *testing.T) {
		s, done := startService(t, sitelink.BMCServiceConfig{Opener: &powerBMC{}, Link: planeLink(t), Node: "agent-1"})
		s.Start(ctx, sitelink.Command{ID: "abort-1", Kind: sitelink.KindBMCTransitionAbort, Abort: "tr-1"})
		waitDone(t, done, "abort-1")
		res, _ := s.Pending()
		want := []sitelink.BMCResult{{ID: "abort-1", Kind: sitelink.KindBMCTransitionAbort, Status: sitelink.StatusOK,
			Message: "transition tr-1 is not running on this agent: aborted if it starts here"}}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("abort of a transition not running (-want +got):\n%s", diff)
		}
	})
}

// TestBMCServiceJournalDamaged: a damaged journal is set aside, the service starts, and a
// destructive command is not sent.
func TestBMCServiceJournalDamaged(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, bmc.JournalFile), []byte(`{"version": 1, "records": [tor`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &powerBMC{}
	s, done := startService(t, sitelink.BMCServiceConfig{Opener: p, Link: planeLink(t), Node: "agent-1", JournalDir: dir})
	s.Start(context.Background(), sitelink.Command{ID: "cmd-1", Kind: sitelink.KindBMCPower, BMC: &sitelink.BMCCommand{
		Target: sitelink.BMCTarget{Driver: "fake", Address: "198.51.100.10", Credential: "bmc-1"}, Action: "cycle"}})
	waitDone(t, done, "cmd-1")
	res, _ := s.Pending()
	if len(res) != 1 || res[0].Status != sitelink.StatusNotSent || p.sent != 0 {
		t.Errorf("power cycle on a damaged journal: %+v (sent %d), want not-sent", res, p.sent)
	}
	damaged := uint64(0)
	for _, x := range s.Samples() {
		if x.Name == "bmc_journal_damaged" {
			damaged = x.Value
		}
	}
	if damaged != 1 {
		t.Errorf("bmc_journal_damaged = %d, want 1", damaged)
	}
}

// ExampleBMCService is an agent's BMC side: each heartbeat hands it the desired state's
// commands (Start takes the bmc.* ones), puts what Pending returns in the report, and
// tells it what the control plane received (Delivered).
func ExampleBMCService() {
	ctx := context.Background()
	plane := registryPlane{reg: &bmc.ClaimRegistry{Store: &bmc.MemoryClaimStore{}}, cred: sitelink.Credential{Username: "admin", Password: "s3cret"}}
	srv := httptest.NewServer(&sitelink.Handler{Server: &fake{}, BMC: plane, Insecure: true})
	defer srv.Close()

	done := make(chan string, 1)
	s, err := sitelink.NewBMCService(sitelink.BMCServiceConfig{
		Opener: &powerBMC{}, // a *bmc.Registry of bmc/redfish and bmc/ipmi in an agent
		Link:   &sitelink.Client{Base: srv.URL, HTTPClient: srv.Client()}, Node: "agent-1",
		OnDone: func(id string) { done <- id }, // wake the heartbeat
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	s.Start(ctx, sitelink.Command{ID: "cmd-1", Kind: sitelink.KindBMCPower, BMC: &sitelink.BMCCommand{
		Target: sitelink.BMCTarget{Driver: "fake", Address: "198.51.100.10", Credential: "bmc-1"}, Action: "cycle"}})
	<-done
	results, _ := s.Pending() // StatusReport.BMC and .Transitions
	fmt.Println(results[0].ID, results[0].Status)
	s.Delivered(results) // the control plane answered the report
	results, _ = s.Pending()
	fmt.Println(len(results))
	// Output:
	// cmd-1 ok
	// 0
}

// TestBMCServiceTransitions: a transition's machines' results and its progress are
// pending each report until delivered, then its own result, after which it is forgotten;
// an abort that came before its transition aborts it when it starts.
func TestBMCServiceTransitions(t *testing.T) {
	ctx := context.Background()
	transition := func(id string) sitelink.Command {
		var ms []sitelink.TransitionMachine
		for _, m := range []string{"m1", "m2"} {
			ms = append(ms, sitelink.TransitionMachine{Name: m, Target: sitelink.BMCTarget{Driver: "fake", Address: "198.51.100." + m[1:], Credential: "bmc-1"}})
		}
		return sitelink.Command{ID: id, Kind: sitelink.KindBMCTransition, Transition: &sitelink.TransitionCommand{Action: "on", Machines: ms}}
	}
	p := &powerBMC{}
	s, done := startService(t, sitelink.BMCServiceConfig{Opener: p, Link: planeLink(t), Node: "agent-1",
		BMCLimits: sitelink.BMCLimits{TransitionSettle: time.Millisecond}})

	s.Start(ctx, transition("tr-1"))
	waitDone(t, done, "tr-1")
	res, prog := s.Pending()
	byID := map[string]sitelink.BMCResult{}
	for _, r := range res {
		byID[r.ID] = r
	}
	if len(res) != 3 || byID["tr-1"].Status != sitelink.StatusOK || byID["tr-1/m1"].Status != sitelink.StatusOK || byID["tr-1/m2"].Machine != "m2" {
		t.Fatalf("pending %+v, want the two machines' results and the transition's", res)
	}
	if want := []sitelink.TransitionProgress{{ID: "tr-1", Action: "on", Total: 2, Done: 2}}; !cmp.Equal(want, prog) {
		t.Errorf("progress %+v, want %+v", prog, want)
	}
	if n := p.sent; n != 2 {
		t.Errorf("%d power-ons sent, want 2", n)
	}
	s.Delivered(res)
	if res, prog := s.Pending(); len(res) != 0 || len(prog) != 0 {
		t.Errorf("after delivery: %+v %+v, want nothing", res, prog)
	}

	s.Start(ctx, sitelink.Command{ID: "abort-2", Kind: sitelink.KindBMCTransitionAbort, Abort: "tr-2"})
	waitDone(t, done, "abort-2")
	s.Start(ctx, transition("tr-2"))
	waitDone(t, done, "tr-2")
	res, prog = s.Pending()
	aborted := 0
	for _, r := range res {
		if r.Transition == "tr-2" && r.Status == sitelink.StatusAborted {
			aborted++
		}
	}
	if aborted != 2 || len(prog) != 1 || !prog[0].Aborting || prog[0].Aborted != 2 || p.sent != 2 {
		t.Errorf("a transition aborted before it started: %+v %+v (sent %d), want both machines aborted, nothing sent", res, prog, p.sent)
	}
}
