package bmc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/clock"
)

// Defaults of the Executor.
const (
	// DefaultMaxConcurrent bounds the operations an Executor runs at once, across BMCs.
	DefaultMaxConcurrent = 16
	// DefaultOpTimeout is the deadline of one operation: the wait for its BMC, the claim,
	// the login, the operation and the logout.
	DefaultOpTimeout = 2 * time.Minute
)

// Credential is a BMC account's user name and password. It prints as redacted with every
// fmt verb and in slog, so it cannot be logged by mistake.
type Credential struct {
	Username string
	Password string
}

const redacted = "bmc.Credential{REDACTED}"

// String implements fmt.Stringer, redacted.
func (Credential) String() string { return redacted }

// GoString implements fmt.GoStringer, redacted.
func (Credential) GoString() string { return redacted }

// Format implements fmt.Formatter: every verb prints the redacted form.
func (Credential) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue implements slog.LogValuer, redacted.
func (Credential) LogValue() slog.Value { return slog.StringValue(redacted) }

// Credentials fetches a credential by reference (from the host, a vault, ...).
type Credentials interface {
	Credential(ctx context.Context, ref string) (Credential, error)
}

// CredentialsFunc adapts a function to Credentials.
type CredentialsFunc func(ctx context.Context, ref string) (Credential, error)

// Credential calls f(ctx, ref).
func (f CredentialsFunc) Credential(ctx context.Context, ref string) (Credential, error) {
	return f(ctx, ref)
}

// TargetRef names a BMC and its credential by reference: what a command carries.
type TargetRef struct {
	Driver  string
	Address string
	// Credential is the reference the Executor's Credentials resolves. Not a secret.
	Credential string
	CertSHA256 []byte
	Insecure   bool
}

// key identifies the BMC for the one-operation-at-a-time rule.
func (t TargetRef) key() string { return t.Driver + "\x00" + t.Address }

// operation is what the Executor runs: RunOp builds one from a typed Op.
type operation struct {
	// ID is the command's id. Required for a destructive operation: it is journaled and
	// claimed under it. A non-destructive one (a query) may leave it empty.
	ID string
	// Name names the operation in errors, logs and the journal ("power", "set-boot", ...).
	Name string
	// Destructive marks an operation that changes the machine or the BMC: it is sent at
	// most once.
	Destructive bool
	Target      TargetRef
	// Do runs the operation on an open driver and returns what it read, or nil.
	Do func(ctx context.Context, d Driver) (any, error)
}

// Result is how an operation ended.
type Result struct {
	ID      string
	Outcome Outcome
	// Replayed: the outcome came from the journal or the host's claim record, and nothing
	// was sent this time.
	Replayed bool
	// Value is what Do returned, when it ran and succeeded.
	Value any
	// Claim is how the claim of a destructive operation was answered, when it was made
	// through Claims ("" when no claim was made).
	Claim ClaimAnswer
}

// Executor runs BMC operations for an agent: one operation at a time per BMC, at most
// MaxConcurrent at once overall, each under its own deadline, the session always closed
// after it or given back to Sessions.
// A destructive operation is journaled, and claimed through Claims, before it reaches the
// BMC, so that neither a repeat, a restart nor a failover sends it twice. Credentials are
// fetched by reference when an operation needs them and kept in memory only; they never
// appear in logs, errors or results.
//
// A BMC that hangs holds its own queue and one slot of MaxConcurrent until the deadline of
// the operation in progress; every other BMC goes on.
type Executor struct {
	// Opener opens a driver for a target, typically a *Registry. Required.
	Opener Opener
	// Credentials resolves TargetRef.Credential. Required for targets that name one.
	Credentials Credentials
	// Journal records destructive operations; nil means an in-memory MemoryJournal (a
	// restart then forgets them: an agent passes a FileJournal).
	Journal Journal
	// Claims claims destructive operations through the host; nil means the journal alone
	// guards them (one agent, no failover).
	Claims Claimer
	// OnClaim, when set, is told how each claim through Claims was answered (a host's
	// counters). It must not block.
	OnClaim func(req ClaimRequest, a ClaimAnswer)
	// MaxConcurrent bounds operations in progress; zero means DefaultMaxConcurrent.
	MaxConcurrent int
	// Timeout is each operation's deadline; zero means DefaultOpTimeout.
	Timeout time.Duration
	// Logger receives one line per operation (id, name, driver, address, outcome); nil
	// discards.
	Logger *slog.Logger
	// Clock is the clock for the journal; nil means [clock.Real].
	Clock clock.Clock
	// Sessions, when set, keeps one session per BMC open and lends it to each operation
	// instead of logging in and out around every one (see SessionPool); nil opens and
	// closes a session per operation.
	Sessions *SessionPool
	// Wrap, when set, is given each operation's context, target and driver (its session:
	// lent by Sessions or opened for it) and returns the driver the operation runs on,
	// and a function (or nil) called once the operation ended, before the session is given
	// back or closed. The session is given back or closed as it is, never through the
	// driver Wrap returns. A host keeps per-BMC state over whatever session an operation
	// has this way (BootKeepers.Wrap keeps a BootKeeper over each BMC's). nil runs each
	// operation on its session.
	Wrap func(ctx context.Context, t TargetRef, d Driver) (Driver, func())

	once  sync.Once
	slots chan struct{}
	mem   *MemoryJournal

	mu    sync.Mutex
	bmcs  map[string]*bmcQueue
	creds map[string]Credential
}

type bmcQueue struct {
	ch   chan struct{}
	refs int
}

func (e *Executor) init() {
	e.once.Do(func() {
		n := e.MaxConcurrent
		if n <= 0 {
			n = DefaultMaxConcurrent
		}
		e.slots = make(chan struct{}, n)
		e.mem = &MemoryJournal{}
		e.bmcs = make(map[string]*bmcQueue)
		e.creds = make(map[string]Credential)
	})
}

func (e *Executor) journal() Journal {
	if e.Journal != nil {
		return e.Journal
	}
	return e.mem
}

func (e *Executor) now() time.Time { return clock.Or(e.Clock).Now() }

func (e *Executor) logger() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Forget drops the cached credential of ref (after a rotation); the next operation that
// needs it fetches it again.
func (e *Executor) Forget(ref string) {
	e.init()
	e.mu.Lock()
	delete(e.creds, ref)
	e.mu.Unlock()
}

// run runs op and returns how it ended. It returns when op has ended or its deadline (or
// ctx) has passed.
func (e *Executor) run(ctx context.Context, op operation) (res Result) {
	e.init()
	res.ID = op.ID
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = DefaultOpTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	defer func() {
		e.logger().Info("bmc: operation", "id", op.ID, "op", op.Name, "driver", op.Target.Driver,
			"addr", op.Target.Address, "status", string(res.Outcome.Status), "kind", res.Outcome.Kind,
			"replayed", res.Replayed, "duration", time.Since(start))
	}()
	if op.Do == nil || op.Name == "" {
		res.Outcome = NotSent(&OpError{Op: op.Name, Kind: ErrInvalid, Message: "operation without a name or a function"})
		return res
	}
	if !op.Destructive {
		v, sent, err := e.send(ctx, op)
		res.Outcome, res.Value = OutcomeOf(err), v
		if err != nil && !sent {
			res.Outcome.Status = StatusNotSent
		}
		return res
	}
	if op.ID == "" {
		res.Outcome = NotSent(&OpError{Op: op.Name, Kind: ErrInvalid, Message: "a destructive operation needs an id"})
		return res
	}
	return e.runDestructive(ctx, op)
}

// RunOp runs the typed operation op, under command id, on the BMC t names, and returns
// how it ended, once it has ended or its deadline (or ctx) has passed. A destructive op is journaled and claimed under id before it is sent; a non-destructive
// one (Query, ListStorage) is sent at once and keeps working while the journal refuses
// claims (ErrJournalDamaged). op is validated first (an invalid one is StatusNotSent of
// kind ErrInvalid) and reaches the driver through its capability, as Do does: a driver
// without it is a failure of kind ErrUnsupported. A Rotate's NewCredential, and its
// Username when empty (the account of t.Credential), are resolved through Credentials when
// the rotation is sent; t's cached credential is dropped after it. Result.Value is what
// Do returns for op.
func (e *Executor) RunOp(ctx context.Context, id string, t TargetRef, op Op) Result {
	if op == nil {
		return Result{ID: id, Outcome: NotSent(&OpError{Kind: ErrInvalid, Message: "no operation"})}
	}
	if err := op.Validate(); err != nil {
		return Result{ID: id, Outcome: NotSent(err)}
	}
	return e.run(ctx, operation{ID: id, Name: op.Name(), Destructive: IsDestructive(op), Target: t,
		Do: func(ctx context.Context, d Driver) (any, error) { return e.do(ctx, d, t, op) }})
}

// do runs op on d through its capability, resolving a rotation's references.
func (e *Executor) do(ctx context.Context, d Driver, t TargetRef, op Op) (any, error) {
	if !Has(d, op.Capability()) {
		return nil, noCapability(d, op)
	}
	r, ok := op.(Rotate)
	if !ok {
		return op.do(ctx, d)
	}
	if r.Username == "" {
		if t.Credential == "" {
			return nil, &OpError{Driver: d.Name(), Op: r.Name(), Kind: ErrInvalid, Message: "rotation of the target's own account without a credential reference"}
		}
		cur, err := e.credential(ctx, t.Credential)
		if err != nil {
			return nil, err
		}
		r.Username = cur.Username
	}
	if r.NewPassword == "" {
		next, err := e.credential(ctx, r.NewCredential)
		if err != nil {
			return nil, err
		}
		r.NewPassword = next.Password
	}
	// The account's secret changed (or may have): fetch it again next time.
	defer e.Forget(t.Credential)
	return r.do(ctx, d)
}

// NotSent is the outcome of an operation that failed with err before anything was sent
// (a command that did not parse, for instance): OutcomeOf(err) with StatusNotSent.
func NotSent(err error) Outcome {
	o := OutcomeOf(err)
	o.Status = StatusNotSent
	return o
}

func (e *Executor) runDestructive(ctx context.Context, op operation) Result {
	res := Result{ID: op.ID}
	j := e.journal()
	wctx := context.WithoutCancel(ctx) // records are written even after the deadline
	req := ClaimRequest{ID: op.ID, Op: op.Name}
	if ider, ok := j.(interface{ ID() string }); ok {
		req.Journal = ider.ID()
	}
	report := false // the outcome goes to the host's claim record
	attempt := func(ctx context.Context, rec *Record) (Outcome, bool) {
		// Not sent yet: a restart from here on knows it was not.
		rec.Claiming = true
		if err := j.Finish(ctx, *rec); err != nil {
			return NotSent(&OpError{Op: op.Name, Message: msgNotSent + ": journal unavailable", Err: err}), true
		}
		// Wait for the BMC and a slot.
		release, err := e.acquire(ctx, op.Target)
		if err != nil {
			return NotSent(&OpError{Op: op.Name, Addr: op.Target.Address, Kind: ErrTimeout,
				Message: msgNotSent + ": deadline passed waiting for the BMC", Err: err}), true
		}
		defer release()
		if e.Claims != nil {
			g, err := e.Claims.Claim(ctx, req)
			res.Claim = AnswerOf(g, err)
			if e.OnClaim != nil {
				e.OnClaim(req, res.Claim)
			}
			switch {
			case err != nil:
				return NotSent(&OpError{Op: op.Name, Message: msgNotSent + ": the claim was not answered", Err: err}), true
			case !g.Granted && g.State == ClaimReported:
				// Another node (or this one, before) ran it: its outcome stands.
				res.Replayed = true
				return g.Outcome, false
			case !g.Granted:
				return Outcome{Status: StatusNotSent, Message: msgNotSent + ": claimed by " + quote(g.Node) +
					" (" + string(g.State) + ")"}, true
			}
		}
		rec.Claiming = false
		if err := j.Finish(ctx, *rec); err != nil {
			// The journal could not say after a restart that this was sent: do not send.
			report = e.Claims != nil // granted and given up: final
			return NotSent(&OpError{Op: op.Name, Message: msgNotSent + ": journal unavailable", Err: err}), e.Claims == nil
		}
		v, sent, err := e.sendLocked(ctx, op)
		o := OutcomeOf(err)
		if err != nil && !sent {
			o.Status = StatusNotSent
		}
		res.Value = v
		report = e.Claims != nil
		return o, e.Claims == nil && err != nil && notApplied(KindOf(err))
	}
	rec, replayed, err := journaled(ctx, j, op.ID, op.Name, e.now, e.logger(), func(ctx context.Context, rec *Record) (Outcome, bool) {
		o, retryable := attempt(ctx, rec)
		res.Outcome = o
		return o, retryable
	})
	switch {
	case err != nil:
		res.Outcome = NotSent(err)
	case replayed:
		res.Replayed = true
		res.Outcome = ReplayOutcome(rec)
		// The host may have missed the first report: report again (harmless).
		report = e.Claims != nil && res.Outcome.Status != StatusNotSent
	}
	if report {
		e.report(wctx, req, res.Outcome)
	}
	return res
}

const msgNotSent = "not sent"

func (e *Executor) report(ctx context.Context, req ClaimRequest, o Outcome) {
	if err := e.Claims.Report(ctx, req, o); err != nil {
		e.logger().Warn("bmc: report of outcome failed; a repeat of the command reports it again",
			"id", req.ID, "op", req.Op, "err", err)
	}
}

// send runs a non-destructive op under the BMC's queue.
func (e *Executor) send(ctx context.Context, op operation) (any, bool, error) {
	release, err := e.acquire(ctx, op.Target)
	if err != nil {
		return nil, false, &OpError{Op: op.Name, Addr: op.Target.Address, Kind: ErrTimeout,
			Message: "deadline passed waiting for the BMC", Err: err}
	}
	defer release()
	return e.sendLocked(ctx, op)
}

// sendLocked opens the driver (or borrows it from Sessions), runs op (through Wrap) and
// closes the session (or gives it back). sent is false when the operation never reached
// the BMC (no credential, the session could not be opened).
func (e *Executor) sendLocked(ctx context.Context, op operation) (v any, sent bool, err error) {
	tg := Target{Driver: op.Target.Driver, Address: op.Target.Address, CertSHA256: op.Target.CertSHA256,
		Insecure: op.Target.Insecure}
	if ref := op.Target.Credential; ref != "" {
		c, err := e.credential(ctx, ref)
		if err != nil {
			return nil, false, err
		}
		tg.Username, tg.Password = c.Username, c.Password
	}
	var d Driver
	var release func(drop bool)
	if e.Sessions != nil {
		d, release, err = e.Sessions.acquire(ctx, op.Target.key()+"\x00"+op.Target.Credential,
			func(ctx context.Context) (Driver, error) { return e.Opener.Open(ctx, tg) })
	} else {
		d, err = e.Opener.Open(ctx, tg)
	}
	if err != nil {
		if errors.Is(err, ErrAuth) && op.Target.Credential != "" {
			e.Forget(op.Target.Credential)
		}
		return nil, false, err
	}
	defer func() {
		if errors.Is(err, ErrAuth) && op.Target.Credential != "" {
			// Refused during the operation (a session that expired, logging in again with
			// a password changed since): fetch the credential again next time.
			e.Forget(op.Target.Credential)
		}
		if release != nil {
			release(spoils(err) || op.Name == "rotate")
			return
		}
		if cerr := d.Close(); cerr != nil {
			e.logger().Debug("bmc: close failed", "op", op.Name, "addr", op.Target.Address, "err", cerr)
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			err = &OpError{Driver: d.Name(), Op: op.Name, Addr: op.Target.Address, Message: fmt.Sprintf("driver panic: %v", r)}
		}
	}()
	run := d
	if e.Wrap != nil {
		var done func()
		if run, done = e.Wrap(ctx, op.Target, d); done != nil {
			defer done() // before the session is given back or closed
		}
	}
	v, err = op.Do(ctx, run)
	return v, true, err
}

func (e *Executor) credential(ctx context.Context, ref string) (Credential, error) {
	e.mu.Lock()
	c, ok := e.creds[ref]
	e.mu.Unlock()
	if ok {
		return c, nil
	}
	if e.Credentials == nil {
		return Credential{}, &OpError{Op: "credential", Kind: ErrAuth, Message: "no Credentials to resolve " + quote(ref)}
	}
	c, err := e.Credentials.Credential(ctx, ref)
	if err != nil {
		// The fetch error is kept for errors.As but not printed: it may quote the secret.
		return Credential{}, &OpError{Op: "credential", Kind: ErrAuth,
			Message: "credential " + quote(ref) + " could not be fetched", Err: err}
	}
	e.mu.Lock()
	e.creds[ref] = c
	e.mu.Unlock()
	return c, nil
}

// acquire waits for target's queue, then for a slot.
func (e *Executor) acquire(ctx context.Context, t TargetRef) (release func(), err error) {
	k := t.key()
	e.mu.Lock()
	q := e.bmcs[k]
	if q == nil {
		q = &bmcQueue{ch: make(chan struct{}, 1)}
		e.bmcs[k] = q
	}
	q.refs++
	e.mu.Unlock()
	drop := func() {
		e.mu.Lock()
		q.refs--
		if q.refs == 0 {
			delete(e.bmcs, k)
		}
		e.mu.Unlock()
	}
	select {
	case q.ch <- struct{}{}:
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		<-q.ch
		drop()
		return nil, ctx.Err()
	}
	return func() {
		<-e.slots
		<-q.ch
		drop()
	}, nil
}
