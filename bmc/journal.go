package bmc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/clock"
)

// Defaults for the journal.
const (
	// DefaultJournalWindow is how long an operation id is remembered.
	DefaultJournalWindow = 10 * time.Minute
	// DefaultJournalSize bounds MemoryJournal's records.
	DefaultJournalSize = 4096
)

// RecordState is where a journaled operation is.
type RecordState string

// Record states.
const (
	StateRunning RecordState = "running"
	StateDone    RecordState = "done"
	StateFailed  RecordState = "failed"
	// StateUnknown: the operation may have reached the BMC but its outcome was never
	// recorded (the process died while it ran). A repeat is answered ErrOutcomeUnknown and
	// never sent.
	StateUnknown RecordState = "unknown"
)

// Record is one journaled operation.
type Record struct {
	ID      string
	Op      string
	State   RecordState
	Started time.Time
	// Ended is zero while running.
	Ended time.Time
	// Kind and Message describe a failure: Kind is one of the Err* kinds (nil if unknown).
	// A StateDone record may carry ErrDiffers: the operation took effect differently, and
	// Message says what the BMC kept.
	Kind    error
	Message string
	// Retryable marks a failure that shows the operation did not take effect (the BMC was
	// unreachable, refused the login or the request, ...): a repeat runs it again.
	Retryable bool
	// Claiming marks a running operation that has not been sent yet (it waits for its BMC
	// or its claim): a persistent journal that finds it after a restart knows it never
	// reached the BMC. A running record without it may have been sent, and becomes
	// StateUnknown. The Executor clears it, and stores that, just before sending.
	Claiming bool
}

// Journal remembers operations by id. Implementations must be safe for concurrent use.
type Journal interface {
	// Claim records id as running, started at now, unless a record for id exists that
	// started within the journal's window and is not a Retryable failure: then it returns
	// that record and false.
	Claim(ctx context.Context, id, op string, now time.Time) (Record, bool, error)
	// Finish stores the record of an id this caller claimed: its outcome, or a running
	// record's Claiming mark. A persistent journal has stored it when Finish returns nil.
	Finish(ctx context.Context, rec Record) error
}

// MemoryJournal is an in-process Journal: records for Window, at most Size of them (the
// oldest dropped first). The zero value uses DefaultJournalWindow and DefaultJournalSize.
type MemoryJournal struct {
	Window time.Duration
	Size   int

	mu    sync.Mutex
	recs  map[string]Record
	order []string // ids by claim time, oldest first
	id    string
}

// ID is the journal's identity for ClaimRequest.Journal: random, made on first use, so a
// restarted process (with a new MemoryJournal) is never taken for the one that claimed.
func (j *MemoryJournal) ID() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		j.id = hex.EncodeToString(b[:])
	}
	return j.id
}

// Claim implements Journal.
func (j *MemoryJournal) Claim(_ context.Context, id, op string, now time.Time) (Record, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.recs == nil {
		j.recs = make(map[string]Record)
	}
	window := j.Window
	if window <= 0 {
		window = DefaultJournalWindow
	}
	size := j.Size
	if size <= 0 {
		size = DefaultJournalSize
	}
	// Expire from the front (order is by start time); when full, drop the oldest finished
	// record. A running operation inside its window is never dropped to make room.
	for len(j.order) > 0 {
		r, ok := j.recs[j.order[0]]
		expired := !ok || now.Sub(r.Started) >= window
		full := len(j.order) >= size
		if !expired && (!full || r.State == StateRunning) {
			break
		}
		delete(j.recs, j.order[0])
		j.order = j.order[1:]
	}
	r, ok := j.recs[id]
	if ok && !(r.State == StateFailed && r.Retryable) {
		return r, false, nil
	}
	r = Record{ID: id, Op: op, State: StateRunning, Started: now}
	if ok {
		j.order = slices.DeleteFunc(j.order, func(o string) bool { return o == id })
	}
	j.recs[id] = r
	j.order = append(j.order, id)
	return r, true, nil
}

// Finish implements Journal.
func (j *MemoryJournal) Finish(_ context.Context, rec Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.recs[rec.ID]; !ok {
		return nil // expired meanwhile
	}
	j.recs[rec.ID] = rec
	return nil
}

// drop forgets id (a claim whose record could not be stored).
func (j *MemoryJournal) drop(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.recs, id)
	j.order = slices.DeleteFunc(j.order, func(o string) bool { return o == id })
}

// snapshot returns the records, oldest claim first.
func (j *MemoryJournal) snapshot() []Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Record, 0, len(j.order))
	for _, id := range j.order {
		if r, ok := j.recs[id]; ok {
			out = append(out, r)
		}
	}
	return out
}

// load replaces the records with recs (oldest first).
func (j *MemoryJournal) load(recs []Record) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.recs = make(map[string]Record, len(recs))
	j.order = j.order[:0]
	for _, r := range recs {
		if _, dup := j.recs[r.ID]; !dup {
			j.order = append(j.order, r.ID)
		}
		j.recs[r.ID] = r
	}
}

// Len returns the number of records held.
func (j *MemoryJournal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.recs)
}

// Runner runs operations under an operation id so that a repeat is not sent twice.
type Runner struct {
	// Journal holds the records; nil means an internal MemoryJournal with defaults.
	Journal Journal
	// Clock is the clock; nil means [clock.Real].
	Clock clock.Clock
	// Logger receives one line per replayed or refused repeat; nil discards.
	Logger *slog.Logger

	once sync.Once
	mem  *MemoryJournal
}

// ErrReplayed is wrapped in the error Run returns for a failure it answered from the
// journal instead of running the operation again.
var ErrReplayed = errors.New("bmc: answered from the journal")

// Run runs fn unless id was seen within the journal's window. An empty id always runs fn.
//
// For a repeat: while the first run is still going, Run returns an *OpError of kind
// ErrInProgress; once it ended, Run returns nil for a success and an *OpError carrying the
// recorded kind and message for a failure that may have taken effect (ErrTimeout, or of
// no known kind), without calling fn. After a failure that shows the operation did not
// take effect (ErrUnreachable, ErrAuth, ErrRefused, ...) a repeat runs fn again. One that
// took effect differently (ErrDiffers) is done: a repeat returns the recorded ErrDiffers
// error, saying what the BMC kept, without calling fn. errors.Is(err, ErrReplayed) tells
// a replayed failure apart; RunReport also reports a replayed success. A journal that
// cannot claim id (unwritable, closed, or damaged: ErrJournalDamaged) is an *OpError of
// that kind and fn is not called: every operation run under an id is treated as one that
// must not be sent twice.
func (r *Runner) Run(ctx context.Context, id, op string, fn func(context.Context) error) error {
	_, err := r.run(ctx, id, op, fn)
	return err
}

// RunReport is Run, also telling whether the outcome came from the journal.
func (r *Runner) RunReport(ctx context.Context, id, op string, fn func(context.Context) error) (replayed bool, err error) {
	return r.run(ctx, id, op, fn)
}

func (r *Runner) run(ctx context.Context, id, op string, fn func(context.Context) error) (bool, error) {
	if id == "" {
		return false, fn(ctx)
	}
	var runErr error
	rec, replayed, err := journaled(ctx, r.journal(), id, op, r.now, r.logger(), func(ctx context.Context, _ *Record) (Outcome, bool) {
		runErr = fn(ctx)
		return OutcomeOf(runErr), runErr != nil && notApplied(KindOf(runErr))
	})
	switch {
	case err != nil:
		return false, err
	case replayed:
		r.logger().Info("bmc: repeated operation id", "id", id, "op", op, "state", string(rec.State))
		return true, replayErr(rec, op)
	}
	return false, runErr
}

// replayErr is the error Runner answers a repeat of rec with: nil for a success.
func replayErr(rec Record, op string) error {
	o := ReplayOutcome(rec)
	switch o.Status {
	case StatusOK:
		return nil
	case StatusNotSent: // still running
		return &OpError{Op: op, Kind: KindByName(o.Kind), Message: o.Message}
	}
	kind := rec.Kind
	if o.Status == StatusUnknown {
		kind = ErrOutcomeUnknown
	}
	return &OpError{Op: rec.Op, Kind: kind, Message: o.Message, Err: ErrReplayed}
}

// journaled is the one replay path, shared by Runner and Executor. It claims id in j. For
// a repeat (the journal holds a live record of id that is not a retryable failure) it
// returns that record with replayed true and does not call run: the caller answers from
// ReplayOutcome(rec). Otherwise it calls run with the claimed record (which run may store
// meanwhile, as the Executor does with the Claiming mark) and records the outcome run
// returns, retryable meaning a failure that shows nothing took effect, so that a repeat
// runs it again. The outcome is recorded even after ctx has ended; a journal that cannot
// store it is logged. A journal that cannot claim (unwritable, closed, or damaged:
// ErrJournalDamaged) is an *OpError of its kind, and run is not called.
func journaled(ctx context.Context, j Journal, id, op string, now func() time.Time, log *slog.Logger,
	run func(ctx context.Context, rec *Record) (o Outcome, retryable bool)) (rec Record, replayed bool, err error) {
	rec, claimed, err := j.Claim(ctx, id, op, now())
	if err != nil {
		return Record{}, false, journalUnavailable(op, err)
	}
	if !claimed {
		return rec, true, nil
	}
	o, retryable := run(ctx, &rec)
	SettleRecord(&rec, o, retryable, now())
	if err := j.Finish(context.WithoutCancel(ctx), rec); err != nil {
		log.Warn("bmc: journal finish failed", "id", id, "op", op, "err", err)
	}
	return rec, false, nil
}

// journalUnavailable is the error of an operation not sent because its journal could not
// claim it.
func journalUnavailable(op string, err error) error {
	return &OpError{Op: op, Kind: KindOf(err), Message: "journal unavailable; not sent", Err: err}
}

// ReplayOutcome is the outcome a repeat of a journaled operation is answered with, from
// its record: StatusNotSent of kind ErrInProgress while it runs; StatusOK when done
// (StatusDiffers when it took effect differently, with what the BMC kept);
// StatusUnknown when it was running as its process stopped; StatusFailed with the
// recorded kind and message otherwise. Runner and Executor both answer from it.
func ReplayOutcome(rec Record) Outcome {
	switch rec.State {
	case StateRunning:
		return Outcome{Status: StatusNotSent, Kind: KindName(ErrInProgress), Message: "operation " + quote(rec.ID) + " is still running"}
	case StateDone:
		if rec.Kind == ErrDiffers {
			return Outcome{Status: StatusDiffers, Kind: KindName(ErrDiffers), Message: rec.Message}
		}
		return Outcome{Status: StatusOK}
	case StateUnknown:
		msg := rec.Message
		if msg == "" {
			msg = "operation " + quote(rec.ID) + " was running when the journal's process stopped; not sent again"
		}
		return Outcome{Status: StatusUnknown, Kind: KindName(ErrOutcomeUnknown), Message: msg}
	}
	kind := KindName(rec.Kind)
	if kind == "" && rec.Kind != nil {
		kind = rec.Kind.Error()
	}
	return Outcome{Status: StatusFailed, Kind: kind, Message: rec.Message}
}

// SettleRecord writes how an operation ended into its record: StateDone for StatusOK and
// StatusDiffers (done, though not as asked: never sent again), StateUnknown for
// StatusUnknown, StateFailed otherwise, Retryable only for a failure that sent nothing
// that took effect. It is the inverse of ReplayOutcome.
func SettleRecord(rec *Record, o Outcome, retryable bool, ended time.Time) {
	rec.Ended = ended
	rec.Claiming = false
	switch o.Status {
	case StatusOK:
		rec.State, rec.Kind, rec.Message, rec.Retryable = StateDone, nil, "", false
	case StatusDiffers:
		rec.State, rec.Kind, rec.Message, rec.Retryable = StateDone, ErrDiffers, o.Message, false
	case StatusUnknown:
		rec.State, rec.Kind, rec.Message, rec.Retryable = StateUnknown, ErrOutcomeUnknown, o.Message, false
	default:
		rec.State, rec.Kind, rec.Message, rec.Retryable = StateFailed, KindByName(o.Kind), o.Message, retryable
	}
}

// notApplied reports whether a failure of this kind shows that the operation did not take
// effect. A timeout (or an unknown failure) may have, so it is never retried blindly.
func notApplied(kind error) bool {
	switch kind {
	case ErrAuth, ErrUnreachable, ErrTLS, ErrScheme, ErrRefused, ErrUnsupported, ErrUnsupportedDriver, ErrInvalid, ErrClosed,
		ErrNoSession, ErrJournalDamaged:
		return true
	}
	return false
}

func (r *Runner) journal() Journal {
	if r.Journal != nil {
		return r.Journal
	}
	r.once.Do(func() { r.mem = &MemoryJournal{} })
	return r.mem
}

func (r *Runner) now() time.Time { return clock.Or(r.Clock).Now() }

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}
