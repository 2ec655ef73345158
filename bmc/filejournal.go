package bmc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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
	// MaxJournalFileSize is the largest journal file OpenFileJournal reads; a larger one is
	// damaged.
	MaxJournalFileSize = 16 << 20
	// JournalDamagedMarker is the marker file of a damaged journal: while it exists in the
	// journal's directory, the journal refuses every claim (ErrJournalDamaged). It holds
	// JSON saying what was set aside and why. Removing it (or FileJournal.ClearDamage)
	// clears the damage.
	JournalDamagedMarker = "bmc-journal.damaged"
	// JournalSetAsidePrefix starts the name a damaged journal file is renamed to, beside it:
	// "bmc-journal.json.damaged-20260102T030405.000000006Z". Set-aside files are never
	// removed by this package.
	JournalSetAsidePrefix = JournalFile + ".damaged-"
)

// ErrBadJournal: the journal file did not parse. A JournalDamage matches it.
var ErrBadJournal = errors.New("bmc: bad journal file")

// JournalDamage says why a FileJournal is damaged: its file did not parse, or parsed with
// records that did not. As an error (FileJournal.Claim's while damaged) it matches
// ErrJournalDamaged and ErrBadJournal.
type JournalDamage struct {
	// SetAside is the name, in the journal's directory, the damaged file was renamed to.
	SetAside string `json:"set_aside"`
	// Reason says what did not parse.
	Reason string `json:"reason"`
	// At is when the damage was found.
	At time.Time `json:"at"`
	// Kept is the number of records kept from the damaged file, Unparsed among them
	// those kept by their id alone, as StateUnknown; Lost is the number of records that
	// were not kept (-1, unknown, for a file whose frame did not parse).
	Kept     int `json:"kept"`
	Unparsed int `json:"unparsed"`
	Lost     int `json:"lost"`
}

var _ error = &JournalDamage{}

// Error says that destructive operations are refused and why.
func (d *JournalDamage) Error() string {
	return "bmc: journal damaged, destructive operations refused until an operator clears it: " +
		d.Reason + " (set aside as " + d.SetAside + ")"
}

// Unwrap returns ErrJournalDamaged and ErrBadJournal.
func (d *JournalDamage) Unwrap() []error { return []error{ErrJournalDamaged, ErrBadJournal} }

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
//
// # A damaged file
//
// A journal file that does not parse (truncated, garbage, another version, too large) or
// holds a record that does not parse does not stop the process: OpenFileJournal sets the
// file aside (renamed JournalSetAsidePrefix + time, never deleted), starts under a new
// journal id, writes JournalDamagedMarker and opens in the damaged state. Damaged, the
// journal refuses every Claim with a *JournalDamage (ErrJournalDamaged): Runner and the
// Executor send no destructive operation, since what the lost records said was sent
// cannot be known and at-most-once cannot be promised; the Executor's non-destructive
// operations (Query, ListStorage) never use the journal and keep working. The damage
// survives restarts (the marker stays) until an operator, having checked what the machines
// behind the set-aside records did, clears it: FileJournal.ClearDamage, or removing the
// marker file (`rm DATA_DIR/bmc-journal.damaged`), which the journal notices at its next
// claim.
//
// What is kept: when the file's frame (version, journal id, the records array) parses,
// every record in it that parses is kept, settled as after any restart, and a record that
// does not parse but whose id can be read is kept as StateUnknown (a repeat of that id is
// answered "outcome unknown" and never sent); a record without a readable id is lost. A
// file whose frame does not parse keeps nothing: a record read out of a broken frame
// would be a guess. The journal id is always new after damage, so that a control plane's
// ClaimRegistry never grants again to this journal an id that was granted to the old one
// (it answers "outcome unknown" for those).
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
	damage *JournalDamage // nil: not damaged
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
			if strings.HasPrefix(n.Name(), atomicfile.TempPrefix+JournalFile) ||
				strings.HasPrefix(n.Name(), atomicfile.TempPrefix+JournalDamagedMarker) {
				_ = os.Remove(filepath.Join(dir, n.Name()))
			}
		}
	}
	b, err := readJournal(j.path())
	switch {
	case errors.Is(err, os.ErrNotExist):
		if j.id, err = newJournalID(); err != nil {
			return fail(err)
		}
	case err != nil:
		return fail(fmt.Errorf("bmc: journal: %w", err))
	default:
		id, recs, unparsed, lost, perr := parseJournal(b)
		if perr != nil || unparsed+lost != 0 {
			// Damaged: set the file aside, keep what parsed, start under a new id.
			reason := ""
			if perr != nil {
				reason = perr.Error()
				recs, lost = nil, -1
			} else {
				reason = fmt.Sprintf("%d record(s) did not parse: %d kept by their id as unknown, %d lost",
					unparsed+lost, unparsed, lost)
			}
			if err := j.setAside(reason, len(recs), unparsed, lost); err != nil {
				return fail(err)
			}
			if id, err = newJournalID(); err != nil {
				return fail(err)
			}
		}
		j.id = id
		for i := range recs {
			if recs[i].Started.IsZero() { // kept by its id alone: remembered for a window from now
				recs[i].Started = time.Now()
			}
		}
		settle(recs)
		j.mem.load(recs)
	}
	if j.damage == nil {
		if d, err := readDamageMarker(dir); err != nil {
			return fail(err)
		} else if d != nil {
			j.damage = d
		}
	}
	if err := j.write(); err != nil {
		return fail(err)
	}
	return j, nil
}

// msgDamagedRecord is the message of a record kept, by its id alone, from a damaged file.
const msgDamagedRecord = "its journal record was damaged; it may have reached the BMC"

func newJournalID() (string, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("bmc: journal id: %w", err)
	}
	return hex.EncodeToString(id[:]), nil
}

// readJournal reads the journal file, at most one byte past MaxJournalFileSize.
func readJournal(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxJournalFileSize+1))
}

// setAside records the damage: the marker first (so that a crash from here on still finds
// the journal damaged), then the damaged file renamed beside it. The new file written
// after it makes the rename durable (atomicfile syncs the directory).
func (j *FileJournal) setAside(reason string, kept, unparsed, lost int) error {
	now := time.Now().UTC()
	name := JournalSetAsidePrefix + now.Format("20060102T150405.000000000Z")
	for i := 1; ; i++ {
		if _, err := os.Lstat(filepath.Join(j.dir, name)); errors.Is(err, os.ErrNotExist) {
			break
		}
		name = JournalSetAsidePrefix + now.Format("20060102T150405.000000000Z") + "-" + strconv.Itoa(i)
	}
	d := &JournalDamage{SetAside: name, Reason: reason, At: now, Kept: kept, Unparsed: unparsed, Lost: lost}
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("bmc: journal: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(j.dir, JournalDamagedMarker), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("bmc: journal: damage marker: %w", err)
	}
	if err := os.Rename(j.path(), filepath.Join(j.dir, name)); err != nil {
		return fmt.Errorf("bmc: journal: setting the damaged file aside: %w", err)
	}
	j.damage = d
	return nil
}

// readDamageMarker returns the damage the marker in dir records, nil without a marker. A
// marker that does not parse still marks the journal damaged.
func readDamageMarker(dir string) (*JournalDamage, error) {
	b, err := os.ReadFile(filepath.Join(dir, JournalDamagedMarker))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bmc: journal: damage marker: %w", err)
	}
	var d JournalDamage
	if len(b) > 64<<10 || json.Unmarshal(b, &d) != nil || d.Reason == "" {
		d = JournalDamage{Reason: "the damage marker " + JournalDamagedMarker + " is present", Lost: -1}
	}
	return &d, nil
}

// Damage returns why the journal is damaged, and false when it is not. A host says so in
// its status and metrics.
func (j *FileJournal) Damage() (JournalDamage, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if d := j.damaged(); d != nil {
		return *d, true
	}
	return JournalDamage{}, false
}

// damaged returns the damage, noticing a marker an operator removed. Called with j.mu held.
func (j *FileJournal) damaged() *JournalDamage {
	if j.damage == nil {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(j.dir, JournalDamagedMarker)); errors.Is(err, os.ErrNotExist) {
		j.damage = nil
	}
	return j.damage
}

// ClearDamage is the operator's word that the damage is dealt with (the operations the
// set-aside file may have recorded were checked on their machines): it removes the marker
// and the journal claims again. The set-aside file stays. Clearing an undamaged journal is
// a no-op.
func (j *FileJournal) ClearDamage() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return ErrClosed
	}
	if err := os.Remove(filepath.Join(j.dir, JournalDamagedMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("bmc: journal: clearing the damage: %w", err)
	}
	if err := atomicfile.SyncDir(j.dir); err != nil {
		return fmt.Errorf("bmc: journal: clearing the damage: %w", err)
	}
	j.damage = nil
	return nil
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
	if d := j.damaged(); d != nil {
		dc := *d
		return Record{}, false, &dc
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

// parseJournal parses a journal file: its id and the records that parse. An error means
// the frame (version, id, records array) does not parse, and nothing is kept. Of the
// records that did not parse, unparsed counts those whose id could be read (among recs,
// as StateUnknown) and lost the others.
func parseJournal(b []byte) (id string, recs []Record, unparsed, lost int, err error) {
	if len(b) > MaxJournalFileSize {
		return "", nil, 0, 0, fmt.Errorf("larger than %d bytes", MaxJournalFileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f struct {
		V       int               `json:"v"`
		ID      string            `json:"id"`
		Records []json.RawMessage `json:"records"`
	}
	if err := dec.Decode(&f); err != nil {
		return "", nil, 0, 0, err
	}
	if dec.More() {
		return "", nil, 0, 0, errors.New("trailing data")
	}
	if f.V != 1 {
		return "", nil, 0, 0, fmt.Errorf("version %d", f.V)
	}
	if len(f.ID) != 32 {
		return "", nil, 0, 0, errors.New("no journal id")
	}
	if _, err := hex.DecodeString(f.ID); err != nil {
		return "", nil, 0, 0, errors.New("journal id not hex")
	}
	recs = make([]Record, 0, len(f.Records))
	for _, raw := range f.Records {
		r, err := parseRecord(raw)
		if err != nil {
			var idOnly struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &idOnly) == nil && idOnly.ID != "" && len(idOnly.ID) <= MaxIDLen && utf8.ValidString(idOnly.ID) {
				recs = append(recs, Record{ID: idOnly.ID, State: StateUnknown, Kind: ErrOutcomeUnknown, Message: msgDamagedRecord})
				unparsed++
			} else {
				lost++
			}
			continue
		}
		recs = append(recs, r)
	}
	return f.ID, recs, unparsed, lost, nil
}

// parseRecord parses one record; anything malformed is an error.
func parseRecord(raw []byte) (Record, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var jr journalRecordJSON
	if err := dec.Decode(&jr); err != nil {
		return Record{}, err
	}
	if jr.ID == "" || len(jr.ID) > MaxIDLen || len(jr.Op) > MaxIDLen {
		return Record{}, errors.New("record with a bad id or op")
	}
	r := Record{ID: jr.ID, Op: jr.Op, State: RecordState(jr.State), Message: jr.Message,
		Retryable: jr.Retryable, Claiming: jr.Claiming}
	switch r.State {
	case StateRunning, StateDone, StateFailed, StateUnknown:
	default:
		return Record{}, fmt.Errorf("record %q: state %q", jr.ID, jr.State)
	}
	var err error
	if r.Started, err = time.Parse(time.RFC3339Nano, jr.Started); err != nil {
		return Record{}, fmt.Errorf("record %q: started: %w", jr.ID, err)
	}
	if jr.Ended != "" {
		if r.Ended, err = time.Parse(time.RFC3339Nano, jr.Ended); err != nil {
			return Record{}, fmt.Errorf("record %q: ended: %w", jr.ID, err)
		}
	}
	if jr.Kind != "" {
		if r.Kind = KindByName(jr.Kind); r.Kind == nil {
			r.Kind = errors.New(jr.Kind)
		}
	}
	return r, nil
}
