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
	// Now is the clock; nil means time.Now.
	Now func() time.Time
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
// a replayed failure apart; RunReport also reports a replayed success.
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
	j := r.journal()
	now := r.now()
	rec, claimed, err := j.Claim(ctx, id, op, now)
	if err != nil {
		return false, &OpError{Op: op, Message: "journal unavailable; not sending", Err: err}
	}
	if !claimed {
		r.logger().Info("bmc: repeated operation id", "id", id, "op", op, "state", string(rec.State))
		switch rec.State {
		case StateRunning:
			return true, &OpError{Op: op, Kind: ErrInProgress, Message: "operation " + quote(id) + " is still running"}
		case StateDone:
			if rec.Kind != nil { // took effect differently: what the BMC kept, again
				return true, &OpError{Op: rec.Op, Kind: rec.Kind, Message: rec.Message, Err: ErrReplayed}
			}
			return true, nil
		case StateUnknown:
			return true, &OpError{Op: rec.Op, Kind: ErrOutcomeUnknown, Message: "operation " + quote(id) +
				" was running when the journal's process stopped; not sent again", Err: ErrReplayed}
		default:
			return true, &OpError{Op: rec.Op, Kind: rec.Kind, Message: rec.Message, Err: ErrReplayed}
		}
	}
	runErr := fn(ctx)
	rec.Ended = r.now()
	switch kind := KindOf(runErr); {
	case runErr == nil:
		rec.State = StateDone
	case kind == ErrDiffers: // done, though not as asked: never sent again
		rec.State, rec.Kind, rec.Message = StateDone, kind, runErr.Error()
	default:
		rec.State = StateFailed
		rec.Kind = KindOf(runErr)
		rec.Message = runErr.Error()
		rec.Retryable = notApplied(rec.Kind)
	}
	// The outcome must be recorded even when ctx has ended.
	if err := j.Finish(context.WithoutCancel(ctx), rec); err != nil {
		r.logger().Warn("bmc: journal finish failed", "id", id, "op", op, "err", err)
	}
	return false, runErr
}

// notApplied reports whether a failure of this kind shows that the operation did not take
// effect. A timeout (or an unknown failure) may have, so it is never retried blindly.
func notApplied(kind error) bool {
	switch kind {
	case ErrAuth, ErrUnreachable, ErrTLS, ErrScheme, ErrRefused, ErrUnsupported, ErrUnsupportedDriver, ErrInvalid, ErrClosed,
		ErrNoSession:
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

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}
