package bmc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
)

// fakeBMCs is an Opener of in-process BMCs (these tests are about the Executor's own
// scheduling; the drivers against real BMCs are tested in bmc/ipmi and bmc/redfish). The
// BMC "hang" never answers: its operations block until their deadline.
type fakeBMCs struct {
	mu       sync.Mutex
	inFlight map[string]int
	maxPer   int // most operations in flight on one BMC at once
	total    int
	maxTotal int
	opened   int
	closed   int
	received map[string]int // power actions received, by BMC
	password string
	hanging  chan string // told each time the hanging BMC takes an operation
}

func newFakeBMCs(password string) *fakeBMCs {
	return &fakeBMCs{inFlight: map[string]int{}, received: map[string]int{}, password: password}
}

type fakeSession struct {
	f    *fakeBMCs
	addr string
	once sync.Once
}

func (s *fakeSession) Name() string { return "fake" }
func (s *fakeSession) Close() error {
	s.once.Do(func() { s.f.mu.Lock(); s.f.closed++; s.f.mu.Unlock() })
	return nil
}

func (f *fakeBMCs) Open(_ context.Context, t bmc.Target) (bmc.Driver, error) {
	if t.Password != f.password {
		return nil, &bmc.OpError{Driver: "fake", Op: "open", Addr: t.Address, Kind: bmc.ErrAuth, Message: "wrong password"}
	}
	f.mu.Lock()
	f.opened++
	f.mu.Unlock()
	return &fakeSession{f: f, addr: t.Address}, nil
}

// SetPower makes s a PowerController: it records the operation on its BMC, and on the
// BMC "hang" blocks until the deadline.
func (s *fakeSession) SetPower(ctx context.Context, _ bmc.PowerAction) error {
	f := s.f
	f.mu.Lock()
	f.inFlight[s.addr]++
	f.total++
	f.maxPer = max(f.maxPer, f.inFlight[s.addr])
	f.maxTotal = max(f.maxTotal, f.total)
	f.received[s.addr]++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight[s.addr]--
		f.total--
		f.mu.Unlock()
	}()
	if s.addr == "hang" {
		if f.hanging != nil {
			f.hanging <- s.addr
		}
		<-ctx.Done()
		return &bmc.OpError{Driver: "fake", Op: "power", Addr: s.addr, Kind: bmc.ErrTimeout, Err: ctx.Err()}
	}
	return nil
}

func (s *fakeSession) PowerState(context.Context) (bmc.PowerState, error) { return bmc.PowerOn, nil }

// Inspect makes s an Inspector, so that it answers a Query.
func (s *fakeSession) Inspect(context.Context) (bmc.Inventory, error) { return bmc.Inventory{}, nil }

const secret = "pa55-W0rd-never-logged"

func TestExecutorAHangingBMCBlocksNoOther(t *testing.T) {
	f := newFakeBMCs(secret)
	var logs bytes.Buffer
	var fetched atomic.Int32
	const timeout = 2 * time.Second
	e := &bmc.Executor{
		Opener: f,
		Credentials: bmc.CredentialsFunc(func(_ context.Context, ref string) (bmc.Credential, error) {
			fetched.Add(1)
			return bmc.Credential{Username: "admin", Password: secret}, nil
		}),
		MaxConcurrent: 3,
		Timeout:       timeout,
		Logger:        slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	ctx := context.Background()
	op := func(c context.Context, id, addr string) bmc.Result {
		return e.RunOp(c, id, bmc.TargetRef{Driver: "fake", Address: addr, Credential: "vault:bmc/" + addr},
			bmc.SetPower{Action: bmc.PowerActionCycle})
	}
	// Two operations on the hanging BMC: the first hangs until its deadline; the second,
	// queued behind it with a shorter deadline of its caller's, ends before it is sent.
	f.hanging = make(chan string, 2)
	var wg sync.WaitGroup
	hung := make([]bmc.Result, 2)
	wg.Add(2)
	go func() { defer wg.Done(); hung[0] = op(ctx, "hang-0", "hang") }()
	<-f.hanging
	go func() {
		defer wg.Done()
		c, cancel := context.WithTimeout(ctx, timeout/4)
		defer cancel()
		hung[1] = op(c, "hang-1", "hang")
	}()
	// Meanwhile 40 operations on 4 other BMCs, 10 each, all at once.
	start := time.Now()
	results := make([]bmc.Result, 40)
	var others sync.WaitGroup
	for i := range results {
		others.Add(1)
		go func() {
			defer others.Done()
			results[i] = op(ctx, fmt.Sprint("op-", i), fmt.Sprint("bmc-", i%4))
		}()
	}
	others.Wait()
	othersTook := time.Since(start)
	wg.Wait()
	for _, r := range results {
		if r.Outcome.Status != bmc.StatusOK {
			t.Errorf("%s: %+v", r.ID, r.Outcome)
		}
	}
	if othersTook >= timeout {
		t.Errorf("the other BMCs took %v, as long as the hanging BMC's deadline %v", othersTook, timeout)
	}
	// The first reached the BMC and timed out: unknown whether it took effect, so it is a
	// failure of kind timeout. The second never reached it.
	if o := hung[0].Outcome; o.Status != bmc.StatusFailed || o.Kind != "timeout" {
		t.Errorf("the hanging operation: %+v", o)
	}
	if o := hung[1].Outcome; o.Status != bmc.StatusNotSent || o.Kind != "timeout" {
		t.Errorf("the one queued behind it: %+v", o)
	}
	f.mu.Lock()
	if f.maxPer != 1 {
		t.Errorf("%d operations at once on one BMC", f.maxPer)
	}
	if f.maxTotal > 3 {
		t.Errorf("%d operations at once overall, bound 3", f.maxTotal)
	}
	if f.opened != f.closed {
		t.Errorf("%d sessions opened, %d closed", f.opened, f.closed)
	}
	if n := f.received["bmc-0"]; n != 10 {
		t.Errorf("bmc-0 received %d operations, want 10", n)
	}
	f.mu.Unlock()
	if n := fetched.Load(); n != 5 {
		t.Errorf("credentials fetched %d times, want once per reference (5)", n)
	}
	// A repeat is answered from the journal.
	r := op(ctx, "op-0", "bmc-0")
	f.mu.Lock()
	n := f.received["bmc-0"]
	f.mu.Unlock()
	if !r.Replayed || r.Outcome.Status != bmc.StatusOK || n != 10 {
		t.Errorf("repeat: %+v, bmc-0 received %d operations, want 10", r, n)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the password is in the log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "op-0") {
		t.Error("nothing logged")
	}
}

func TestExecutorCredentials(t *testing.T) {
	f := newFakeBMCs(secret)
	var logs bytes.Buffer
	current := "stale-" + secret
	fetches := 0
	e := &bmc.Executor{
		Opener: f,
		Credentials: bmc.CredentialsFunc(func(_ context.Context, ref string) (bmc.Credential, error) {
			fetches++
			if ref == "vault:missing" {
				return bmc.Credential{}, errors.New("vault says no to token " + secret)
			}
			return bmc.Credential{Username: "admin", Password: current}, nil
		}),
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	ctx := context.Background()
	q := func(ref string) bmc.Result {
		return e.RunOp(ctx, "", bmc.TargetRef{Driver: "fake", Address: "bmc-1", Credential: ref}, bmc.Query{})
	}
	r := q("vault:bmc-1")
	if r.Outcome.Kind != "auth" {
		t.Fatalf("stale password: %+v", r.Outcome)
	}
	current = secret // rotated at the source: the failed login dropped the cached one
	if r := q("vault:bmc-1"); r.Outcome.Status != bmc.StatusOK || r.Value.(bmc.QueryResult).Power != bmc.PowerOn {
		t.Errorf("after the rotation: %+v", r)
	}
	if fetches != 2 {
		t.Errorf("%d fetches, want 2 (the stale one dropped after ErrAuth)", fetches)
	}
	r = q("vault:missing")
	if r.Outcome.Kind != "auth" || !strings.Contains(r.Outcome.Message, "vault:missing") {
		t.Errorf("missing credential: %+v", r.Outcome)
	}
	c := bmc.Credential{Username: "admin", Password: secret}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s %q", c, c, c, c, c), r.Outcome.Message} {
		if strings.Contains(s, secret) {
			t.Errorf("secret shown: %s", s)
		}
	}
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "cred", c)
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the password is in the log:\n%s", logs.String())
	}
}

// The executor claims destructive operations through the registry: a second agent given
// the same command after the first ran it sends nothing and reuses the outcome.
func TestExecutorClaimsAcrossAgents(t *testing.T) {
	f := newFakeBMCs(secret)
	reg := &bmc.ClaimRegistry{Store: &bmc.MemoryClaimStore{}}
	creds := bmc.CredentialsFunc(func(context.Context, string) (bmc.Credential, error) {
		return bmc.Credential{Username: "admin", Password: secret}, nil
	})
	agent := func(node string) *bmc.Executor {
		return &bmc.Executor{Opener: f, Credentials: creds, Claims: reg.For(node), Journal: &bmc.MemoryJournal{}}
	}
	a, b := agent("agent-a"), agent("agent-b")
	ctx := context.Background()
	tg := bmc.TargetRef{Driver: "fake", Address: "bmc-1", Credential: "ref"}
	op := bmc.SetPower{Action: bmc.PowerActionOn}
	if d, _ := reg.Route(ctx, "cmd-1", "power", "agent-a"); d.Action != bmc.RouteSend {
		t.Fatalf("route: %+v", d)
	}
	if r := a.RunOp(ctx, "cmd-1", tg, op); r.Outcome.Status != bmc.StatusOK || r.Replayed {
		t.Fatalf("agent-a: %+v", r)
	}
	// Failover: the control plane routes it to agent-b, which must not send it again.
	d, err := reg.Route(ctx, "cmd-1", "power", "agent-b")
	if err != nil || d.Action != bmc.RouteReuse || d.Outcome.Status != bmc.StatusOK {
		t.Errorf("route after the report: %+v, %v", d, err)
	}
	if r := b.RunOp(ctx, "cmd-1", tg, op); !r.Replayed || r.Outcome.Status != bmc.StatusOK {
		t.Errorf("agent-b: %+v", r)
	}
	if f.received["bmc-1"] != 1 {
		t.Errorf("the BMC received cmd-1 %d times", f.received["bmc-1"])
	}
}
