package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/sitelink"
)

// recordingLink is the plane's in-process link (a sitelink.BMCLink) that keeps every
// report the agent sent.
type recordingLink struct {
	*controlplane.LocalLink
	mu      sync.Mutex
	reports []sitelink.StatusReport
}

func (l *recordingLink) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	l.mu.Lock()
	l.reports = append(l.reports, r)
	l.mu.Unlock()
	return l.LocalLink.Sync(ctx, r)
}

// progress returns transition id's progress in each report that carried it, in order.
func (l *recordingLink) progress(id string) []sitelink.TransitionProgress {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sitelink.TransitionProgress
	for _, r := range l.reports {
		for _, p := range r.Transitions {
			if p.ID == id {
				out = append(out, p)
			}
		}
	}
	return out
}

// machineResults counts, by machine, the results of transition id the reports carried.
func (l *recordingLink) machineResults(id string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, r := range l.reports {
		for _, res := range r.BMC {
			if res.Transition == id {
				out[res.Machine]++
			}
		}
	}
	return out
}

// transitionSite is a control plane, n fake Redfish BMCs and an agent whose link to the
// plane is recorded; the agent's transitions run at rate power-ons per second.
type transitionSite struct {
	plane *controlplane.Plane
	link  *recordingLink
	bmcs  map[string]*bmctest.Server // by machine name
	body  sitelink.TransitionCommand
	agent *agent.Agent // the agent running
}

func newTransitionSite(t *testing.T, n int, rate float64) *transitionSite {
	t.Helper()
	s := newTransitionPlane(t, n)
	s.start(t, rate, t.TempDir())
	return s
}

// newTransitionPlane is newTransitionSite without its agent.
func newTransitionPlane(t *testing.T, n int) *transitionSite {
	t.Helper()
	s := &transitionSite{plane: controlplane.New(nil), bmcs: map[string]*bmctest.Server{}}
	s.plane.Enroll("site-k", "agent-k")
	s.plane.SetCredential("bmc/m", bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword})
	s.body = sitelink.TransitionCommand{Action: "cycle"}
	for i := range n {
		srv := bmctest.NewServer(bmctest.Options{})
		t.Cleanup(srv.Close)
		name := fmt.Sprintf("m%02d", i)
		s.bmcs[name] = srv
		s.body.Machines = append(s.body.Machines, sitelink.TransitionMachine{Name: name, Group: "pdu-1",
			Target: sitelink.BMCTarget{Driver: redfish.Name, Address: srv.URL, Credential: "bmc/m"}})
	}
	return s
}

// start runs the site's agent on dataDir, linked to the plane by a new recorded link, its
// metrics on a loopback port.
func (s *transitionSite) start(t *testing.T, rate float64, dataDir string) (stop func()) {
	t.Helper()
	s.link = &recordingLink{LocalLink: s.plane.Link()}
	s.agent, stop = startAgent(t, "site-k", "agent-k", s.link, func(c *agent.Config) {
		c.DataDir = dataDir
		c.BMC.PowerOnRate = rate
		c.BMC.TransitionSettle = 10 * time.Millisecond
		c.Metrics.Listen = netip.MustParseAddrPort("127.0.0.1:0")
	})
	return stop
}

// metrics returns the agent's /metrics samples whose series starts with prefix, by series.
func (s *transitionSite) metrics(t *testing.T, prefix string) map[string]string {
	t.Helper()
	_, body := get(t, "http://"+s.agent.Addrs()["metrics"]+"/metrics")
	out := map[string]string{}
	for _, l := range strings.Split(body, "\n") {
		if series, v, ok := strings.Cut(l, " "); ok && strings.HasPrefix(series, prefix) {
			out[series] = v
		}
	}
	return out
}

// boots counts each machine's boots, and resets the reset requests its BMC got (a cycle
// is sent as an off and an on).
func (s *transitionSite) boots() (boots, resets map[string]int) {
	boots, resets = map[string]int{}, map[string]int{}
	for name, srv := range s.bmcs {
		boots[name] = len(srv.Boots())
		for _, r := range srv.Requests() {
			if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "ComputerSystem.Reset") {
				resets[name]++
			}
		}
	}
	return boots, resets
}

// checkProgress checks that every progress report adds up and never goes back.
func checkProgress(t *testing.T, ps []sitelink.TransitionProgress, total int) {
	t.Helper()
	var last sitelink.TransitionProgress
	for i, p := range ps {
		if p.Total != total || p.Pending+p.Done+p.Failed+p.Unknown+p.Aborted != total {
			t.Errorf("report %d: progress %+v does not add up to %d", i, p, total)
		}
		if p.Done < last.Done || p.Aborted < last.Aborted || p.Pending > last.Pending && i > 0 {
			t.Errorf("report %d: progress went back: %+v after %+v", i, p, last)
		}
		last = p
	}
}

// TestBMCTransition: a power cycle over six machines arrives as one bmc.transition command
// from the control plane; the agent runs it under its power-on ramp (4 a second), each
// step claimed through the plane, and reports its progress on each heartbeat (seen
// growing over successive reports) and each machine's result once; the transition's own
// result says every machine is done, and every BMC got one power cycle.
func TestBMCTransition(t *testing.T) {
	const n = 6
	s := newTransitionSite(t, n, 4)
	id, err := s.plane.Transition("site-k", s.body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.plane.WaitBMC(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != sitelink.StatusOK || res.Progress == nil || res.Progress.Done != n {
		t.Fatalf("transition result %+v (progress %+v), want ok with %d done", res, res.Progress, n)
	}
	// The machines' results went in reports the plane answered before (or with) the
	// transition's own.
	st, ok := s.plane.TransitionState(id)
	if !ok || len(st.Machines) != n || st.Repeats != 0 {
		t.Fatalf("plane's state of the transition: %+v, want %d machines reported once", st, n)
	}
	for name, r := range st.Machines {
		if r.Status != sitelink.StatusOK || r.Power != string(bmc.PowerOn) || r.Sends != 1 || r.ID != id+"/"+name {
			t.Errorf("machine %s: %+v, want ok, on, one send", name, r)
		}
	}
	for name, k := range s.link.machineResults(id) {
		if k != 1 {
			t.Errorf("machine %s reported %d times", name, k)
		}
	}
	boots, _ := s.boots()
	for name := range s.bmcs {
		if boots[name] != 1 {
			t.Errorf("machine %s booted %d times, want 1", name, boots[name])
		}
	}
	// The agent's ramp (4 a second: at most 4 in any second) spread the six power-ons over
	// more than a second; without it they all go out at once.
	var first, last time.Time
	for _, srv := range s.bmcs {
		for _, at := range srv.PowerOnsSent() {
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
	}
	if span := last.Sub(first); span < 800*time.Millisecond {
		t.Errorf("the six power-ons went out within %v: the agent's power-on rate was not applied", span)
	}
	ps := s.link.progress(id)
	checkProgress(t, ps, n)
	seen := map[int]bool{}
	for _, p := range ps {
		seen[p.Done] = true
	}
	// At 4 power-ons a second and a heartbeat every 100 ms, the reports see the count grow.
	if len(seen) < 3 {
		t.Errorf("done counts seen over %d heartbeats: %v; want the progress seen growing", len(ps), seen)
	}
}

// TestBMCTransitionAbort: an abort sent while a transition runs (one power-on every half
// second) stops its pending machines, which end "aborted" with nothing sent to their
// BMCs; the machines cycled before it are done; every machine is reported once, and the
// transition's result counts them.
func TestBMCTransitionAbort(t *testing.T) {
	const n = 10
	s := newTransitionSite(t, n, 2)
	id, err := s.plane.Transition("site-k", s.body)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a machine done", func() bool {
		st, _ := s.plane.TransitionState(id)
		return len(st.Machines) > 0
	})
	aid, err := s.plane.AbortTransition("site-k", id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ar, err := s.plane.WaitBMC(ctx, aid)
	if err != nil || ar.Status != sitelink.StatusOK {
		t.Fatalf("abort: %+v, %v", ar, err)
	}
	res, err := s.plane.WaitBMC(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.plane.TransitionState(id)
	if len(st.Machines) != n || st.Repeats != 0 {
		t.Fatalf("machines reported: %d (repeats %d), want %d once each", len(st.Machines), st.Repeats, n)
	}
	boots, resets := s.boots()
	count := map[string]int{}
	for name, r := range st.Machines {
		count[r.Status]++
		switch r.Status {
		case sitelink.StatusAborted:
			if resets[name] != 0 || boots[name] != 0 || r.Sends != 0 {
				t.Errorf("aborted machine %s: %d reset requests sent, %d boots (%+v)", name, resets[name], boots[name], r)
			}
		case sitelink.StatusOK:
			if boots[name] != 1 {
				t.Errorf("done machine %s booted %d times, want 1", name, boots[name])
			}
		default:
			t.Errorf("machine %s: %+v, want ok or aborted", name, r)
		}
	}
	t.Logf("statuses %v", count)
	if count[sitelink.StatusAborted] == 0 || count[sitelink.StatusOK] == 0 {
		t.Errorf("statuses %v: want some done before the abort and some aborted", count)
	}
	p := res.Progress
	if res.Status != sitelink.StatusFailed || p == nil || p.Aborted != count[sitelink.StatusAborted] ||
		p.Done != count[sitelink.StatusOK] || p.Pending != 0 || !p.Aborting {
		t.Errorf("transition result %+v (progress %+v), want failed counting %v", res, p, count)
	}
	checkProgress(t, s.link.progress(id), n)
	want := map[string]string{
		`siteboot_bmc_transition_machines_total{status="aborted"}`: strconv.Itoa(count[sitelink.StatusAborted]),
		`siteboot_bmc_transition_machines_total{status="done"}`:    strconv.Itoa(count[sitelink.StatusOK]),
		`siteboot_bmc_transition_machines_total{status="failed"}`:  "0",
		`siteboot_bmc_transition_machines_total{status="unknown"}`: "0",
		`siteboot_bmc_transition_power_ons_total`:                  strconv.Itoa(count[sitelink.StatusOK]),
		`siteboot_bmc_transitions_running`:                         "0",
	}
	if diff := cmp.Diff(want, s.metrics(t, "siteboot_bmc_transition")); diff != "" {
		t.Errorf("transition metrics (-want +got):\n%s", diff)
	}
}

// TestBMCTransitionResumesAfterRestart: an agent stopped half way through a transition and
// started again on its data dir gets the transition again from the control plane and
// resumes it: the steps it took are answered from its journal and the claim records, so no
// machine is cycled twice; every machine ends reported, those whose cycle was under way
// when it stopped unknown (never sent again), the others done.
func TestBMCTransitionResumesAfterRestart(t *testing.T) {
	const n = 8
	s := newTransitionPlane(t, n)
	dir := t.TempDir()
	stop := s.start(t, 2, dir)
	id, err := s.plane.Transition("site-k", s.body)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two machines done", func() bool {
		st, _ := s.plane.TransitionState(id)
		return len(st.Machines) >= 2
	})
	stop()
	before, _ := s.plane.TransitionState(id)
	if len(before.Machines) == n {
		t.Fatal("the transition ended before the agent stopped")
	}
	s.start(t, 2, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.plane.WaitBMC(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.plane.TransitionState(id)
	if len(st.Machines) != n {
		t.Fatalf("%d machines reported, want %d", len(st.Machines), n)
	}
	boots, _ := s.boots()
	count := map[string]int{}
	for name, r := range st.Machines {
		count[r.Status]++
		if boots[name] > 1 {
			t.Errorf("machine %s booted %d times across the restart", name, boots[name])
		}
		switch r.Status {
		case sitelink.StatusOK:
			if boots[name] != 1 {
				t.Errorf("done machine %s booted %d times, want 1", name, boots[name])
			}
		case sitelink.StatusUnknown:
		default:
			t.Errorf("machine %s: %+v, want done, or unknown where its step was under way", name, r)
		}
	}
	for name, r := range before.Machines {
		if r.Status == sitelink.StatusOK && st.Machines[name].Status != sitelink.StatusOK {
			t.Errorf("machine %s done before the restart reads %+v after it", name, st.Machines[name])
		}
	}
	t.Logf("reported before the restart: %d; statuses after: %v; repeats %d", len(before.Machines), count, st.Repeats)
	if count[sitelink.StatusOK] <= len(before.Machines) {
		t.Errorf("statuses %v: the restarted agent carried out none of the machines left", count)
	}
	if p := res.Progress; p == nil || p.Total != n || p.Done+p.Unknown != n {
		t.Errorf("transition result %+v (progress %+v)", res, res.Progress)
	}
}
