package bmc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/internal/atomicfile"
	"github.com/bettercompute/siteboot/internal/filelock"
)

// Names and defaults of FileJournal.
const (
	// JournalFile is the journal's file in its directory; JournalLock is the lock file that
	// keeps a second process from opening the same journal.
	JournalFile = "bmc-journal.json"
	JournalLock = "bmc-journal.lock"
	// DefaultFileJournalWindow is how long a FileJournal remembers an id.
	DefaultFileJournalWindow = 24 * time.Hour
	// DefaultFileJournalSize bounds a FileJournal's records (the file is rewritten whole on
	// every change, so it is kept small).
	DefaultFileJournalSize = 1024
	// MaxJournalFileSize is the largest journal file OpenFileJournal reads.
	MaxJournalFileSize = 16 << 20
)

// ErrBadJournal: the journal file does not parse. OpenFileJournal refuses to start on it
// rather than forget what was sent; an operator moves the file away.
var ErrBadJournal = errors.New("bmc: bad journal file")

// ErrJournalLocked: another process has the journal open.
var ErrJournalLocked = errors.New("bmc: journal in use by another process")

// FileJournal is a Journal persisted in a directory (an agent's data dir): every claim and
// every outcome is written to JournalFile atomically and durably (internal/atomicfile)
// before Claim or Finish returns, so a process killed at any point and started again
// never runs a claimed operation twice:
//
//   - an operation that was running when the process died, and may have reached the BMC,
//     is StateUnknown after the restart: a repeat is answered ErrOutcomeUnknown and not sent;
//   - one that was still waiting for its claim (Record.Claiming) never reached the BMC: it
//     becomes a Retryable failure, and a repeat claims it again.
//
// One process at a time: OpenFileJournal takes an exclusive lock on JournalLock (flock(2)
// on Unix systems, LockFileEx on Windows), held until Close or the process's end.
type FileJournal struct {
	// Window and Size as for MemoryJournal; zero means DefaultFileJournalWindow and
	// DefaultFileJournalSize. Set them before first use.
	Window time.Duration
	Size   int

	dir  string
	id   string
	lock *os.File

	mu     sync.Mutex // serialises changes and their writes
	mem    MemoryJournal
	closed bool
}

var _ Journal = (*FileJournal)(nil)

type journalFileJSON struct {
	V       int                 `json:"v"`
	ID      string              `json:"id"`
	Records []journalRecordJSON `json:"records"`
}

type journalRecordJSON struct {
	ID        string `json:"id"`
	Op        string `json:"op,omitempty"`
	State     string `json:"state"`
	Started   string `json:"started"`
	Ended     string `json:"ended,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Message   string `json:"message,omitempty"`
	Retryable bool   `json:"retryable,omitempty"`
	Claiming  bool   `json:"claiming,omitempty"`
}

// OpenFileJournal opens (or creates) the journal in dir, which must exist. Operations
// found running are settled as described on FileJournal, and the result written back.
func OpenFileJournal(dir string) (*FileJournal, error) {
	lock, err := os.OpenFile(filepath.Join(dir, JournalLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bmc: journal: %w", err)
	}
	if err := filelock.TryLock(lock); err != nil {
		lock.Close()
		if errors.Is(err, filelock.ErrLocked) {
			return nil, fmt.Errorf("%w: %s", ErrJournalLocked, dir)
		}
		return nil, fmt.Errorf("bmc: journal: lock: %w", err)
	}
	j := &FileJournal{dir: dir, lock: lock}
	fail := func(err error) (*FileJournal, error) {
		lock.Close()
		return nil, err
	}
	// Leftovers of a write the process did not finish.
	if names, err := os.ReadDir(dir); err == nil {
		for _, n := range names {
			if strings.HasPrefix(n.Name(), atomicfile.TempPrefix+JournalFile) {
				_ = os.Remove(filepath.Join(dir, n.Name()))
			}
		}
	}
	b, err := os.ReadFile(j.path())
	switch {
	case errors.Is(err, os.ErrNotExist):
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return fail(fmt.Errorf("bmc: journal id: %w", err))
		}
		j.id = hex.EncodeToString(id[:])
	case err != nil:
		return fail(fmt.Errorf("bmc: journal: %w", err))
	default:
		id, recs, err := parseJournal(b)
		if err != nil {
			return fail(fmt.Errorf("%w: %s: %w", ErrBadJournal, j.path(), err))
		}
		j.id = id
		settle(recs)
		j.mem.load(recs)
	}
	if err := j.write(); err != nil {
		return fail(err)
	}
	return j, nil
}

func (j *FileJournal) path() string { return filepath.Join(j.dir, JournalFile) }

// ID is the journal's identity, made when its file was created: ClaimRequest.Journal.
func (j *FileJournal) ID() string { return j.id }

// Dir is the journal's directory.
func (j *FileJournal) Dir() string { return j.dir }

// Close releases the lock; the journal refuses further claims.
func (j *FileJournal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	return j.lock.Close()
}

// Len returns the number of records held.
func (j *FileJournal) Len() int { return j.mem.Len() }

// Records returns the records, oldest claim first.
func (j *FileJournal) Records() []Record { return j.mem.snapshot() }

// Claim implements Journal: the claim is on disk when it returns claimed.
func (j *FileJournal) Claim(ctx context.Context, id, op string, now time.Time) (Record, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return Record{}, false, ErrClosed
	}
	j.mem.Window, j.mem.Size = j.window(), j.size()
	rec, claimed, err := j.mem.Claim(ctx, id, op, now)
	if err != nil || !claimed {
		return rec, claimed, err
	}
	if err := j.write(); err != nil {
		j.mem.drop(id)
		return Record{}, false, err
	}
	return rec, true, nil
}

// Finish implements Journal: the record is on disk when it returns nil.
func (j *FileJournal) Finish(ctx context.Context, rec Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return ErrClosed
	}
	if err := j.mem.Finish(ctx, rec); err != nil {
		return err
	}
	return j.write()
}

func (j *FileJournal) window() time.Duration {
	if j.Window > 0 {
		return j.Window
	}
	return DefaultFileJournalWindow
}

func (j *FileJournal) size() int {
	if j.Size > 0 {
		return j.Size
	}
	return DefaultFileJournalSize
}

func (j *FileJournal) write() error {
	f := journalFileJSON{V: 1, ID: j.id, Records: []journalRecordJSON{}}
	for _, r := range j.mem.snapshot() {
		jr := journalRecordJSON{ID: r.ID, Op: r.Op, State: string(r.State), Started: r.Started.UTC().Format(time.RFC3339Nano),
			Kind: KindName(r.Kind), Message: r.Message, Retryable: r.Retryable, Claiming: r.Claiming}
		if r.Kind != nil && jr.Kind == "" {
			jr.Kind = r.Kind.Error()
		}
		if !r.Ended.IsZero() {
			jr.Ended = r.Ended.UTC().Format(time.RFC3339Nano)
		}
		f.Records = append(f.Records, jr)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("bmc: journal: %w", err)
	}
	if err := atomicfile.Write(j.path(), b, 0o600); err != nil {
		return fmt.Errorf("bmc: journal: %w", err)
	}
	return nil
}

// settle rewrites the records of operations that were running when the process stopped:
// one waiting for its claim never reached the BMC and becomes a Retryable failure; any
// other may have, and becomes StateUnknown.
func settle(recs []Record) {
	for i, r := range recs {
		if r.State != StateRunning {
			continue
		}
		if r.Claiming {
			recs[i].State, recs[i].Retryable, recs[i].Claiming = StateFailed, true, false
			recs[i].Message = "interrupted while waiting for its claim; it was not sent"
		} else {
			recs[i].State = StateUnknown
			recs[i].Message = "running when the process stopped; it may have reached the BMC"
		}
	}
}

// parseJournal parses a journal file: its id and records. Anything malformed is an error.
func parseJournal(b []byte) (string, []Record, error) {
	if len(b) > MaxJournalFileSize {
		return "", nil, fmt.Errorf("%d bytes", len(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f journalFileJSON
	if err := dec.Decode(&f); err != nil {
		return "", nil, err
	}
	if dec.More() {
		return "", nil, errors.New("trailing data")
	}
	if f.V != 1 {
		return "", nil, fmt.Errorf("version %d", f.V)
	}
	if len(f.ID) != 32 {
		return "", nil, errors.New("no journal id")
	}
	if _, err := hex.DecodeString(f.ID); err != nil {
		return "", nil, errors.New("journal id not hex")
	}
	recs := make([]Record, 0, len(f.Records))
	for _, jr := range f.Records {
		if jr.ID == "" || len(jr.ID) > MaxIDLen || len(jr.Op) > MaxIDLen {
			return "", nil, errors.New("record with a bad id or op")
		}
		r := Record{ID: jr.ID, Op: jr.Op, State: RecordState(jr.State), Message: jr.Message,
			Retryable: jr.Retryable, Claiming: jr.Claiming}
		switch r.State {
		case StateRunning, StateDone, StateFailed, StateUnknown:
		default:
			return "", nil, fmt.Errorf("record %q: state %q", jr.ID, jr.State)
		}
		var err error
		if r.Started, err = time.Parse(time.RFC3339Nano, jr.Started); err != nil {
			return "", nil, fmt.Errorf("record %q: started: %w", jr.ID, err)
		}
		if jr.Ended != "" {
			if r.Ended, err = time.Parse(time.RFC3339Nano, jr.Ended); err != nil {
				return "", nil, fmt.Errorf("record %q: ended: %w", jr.ID, err)
			}
		}
		if jr.Kind != "" {
			if r.Kind = KindByName(jr.Kind); r.Kind == nil {
				r.Kind = errors.New(jr.Kind)
			}
		}
		recs = append(recs, r)
	}
	return f.ID, recs, nil
}
