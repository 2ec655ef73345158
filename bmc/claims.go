package bmc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/bettercompute/siteboot/casreg"
	"github.com/bettercompute/siteboot/clock"
)

// The claim protocol. Before a destructive operation (power, boot, rotate, firmware,
// media) reaches a BMC, the agent that runs it claims its operation id through its host
// (Claimer); the host's ClaimRegistry grants a claim once, ever, records the outcome the
// agent reports, and tells the control plane, when it routes a command (again, after a
// failover), whether to send it, reuse a recorded outcome, or report it as unknown.

// ClaimState is where a command is in the claim protocol.
type ClaimState string

// Claim states. A record only moves forward: issued (possibly to another agent), granted,
// reported.
const (
	ClaimNone     ClaimState = ""         // no record
	ClaimIssued   ClaimState = "issued"   // routed to Node, not claimed
	ClaimGranted  ClaimState = "granted"  // granted to Node (its Journal); no outcome yet
	ClaimReported ClaimState = "reported" // Outcome recorded
)

// ClaimRecord is the stored state of one command id.
type ClaimRecord struct {
	ID string
	Op string
	// State is ClaimNone for an id with no record.
	State ClaimState
	// Node is the agent the command is routed to (issued) or was granted to.
	Node string
	// Journal is the granted agent's journal id (see ClaimRequest.Journal).
	Journal string
	// Outcome is the reported outcome (reported).
	Outcome Outcome
	// Updated is when the record last changed.
	Updated time.Time
}

// ClaimVersion identifies one stored state of a claim record; 0 means no record.
type ClaimVersion int64

// ErrClaimConflict: a compare-and-swap found the record changed since it was read.
var ErrClaimConflict = errors.New("bmc: claim record changed meanwhile")

// ClaimStore keeps claim records, one per command id, with compare-and-swap.
// RegisterClaimStore keeps them in a casreg.Register (MemoryClaimStore in memory).
type ClaimStore interface {
	// Get returns id's record and its version; an id with no record yields
	// ClaimRecord{ID: id}, version 0 and no error.
	Get(ctx context.Context, id string) (ClaimRecord, ClaimVersion, error)
	// CompareAndSwap writes rec as id's record if the stored version is still old (0: no
	// record) and returns the new version; otherwise it writes nothing and returns an
	// error matching ErrClaimConflict.
	CompareAndSwap(ctx context.Context, id string, old ClaimVersion, rec ClaimRecord) (ClaimVersion, error)
}

// DefaultClaimPrefix is the key prefix of RegisterClaimStore when its Prefix is empty.
const DefaultClaimPrefix = "/siteboot/bmc-claims/"

// RegisterClaimStore is a ClaimStore over a compare-and-swap register (casreg.Register:
// in memory, or on etcd with github.com/bettercompute/siteboot/lease/etcdstore), for a
// control plane whose ClaimRegistry must survive its restarts and be shared by several of
// its processes. Each command id's record is the value of one key, Prefix + id, holding
// EncodeClaim's JSON; the record's version is the register's version of the key. Records
// are never removed: a claim is granted once, ever.
//
// A value that does not parse, or that names another id, is an error matching
// ErrBadClaim and is never overwritten by this store. Set the fields before first use; it
// is safe for concurrent use.
type RegisterClaimStore struct {
	// Register keeps the values. Required.
	Register casreg.Register
	// Prefix of the keys; empty: DefaultClaimPrefix.
	Prefix string
}

var _ ClaimStore = (*RegisterClaimStore)(nil)

// Key returns the register key of command id's record.
func (s *RegisterClaimStore) Key(id string) string {
	p := s.Prefix
	if p == "" {
		p = DefaultClaimPrefix
	}
	return p + id
}

// Get implements ClaimStore.
func (s *RegisterClaimStore) Get(ctx context.Context, id string) (ClaimRecord, ClaimVersion, error) {
	b, ver, err := s.Register.Get(ctx, s.Key(id))
	if err != nil {
		return ClaimRecord{}, 0, fmt.Errorf("bmc: claim %q: %w", id, err)
	}
	if ver == 0 {
		return ClaimRecord{ID: id}, 0, nil
	}
	rec, err := ParseClaim(b)
	if err != nil {
		return ClaimRecord{}, 0, fmt.Errorf("bmc: claim %q: %w", id, err)
	}
	if rec.ID != id {
		return ClaimRecord{}, 0, fmt.Errorf("bmc: claim %q: %w: key holds the record of %q", id, ErrBadClaim, rec.ID)
	}
	return rec, ClaimVersion(ver), nil
}

// CompareAndSwap implements ClaimStore. The new version is the register's.
func (s *RegisterClaimStore) CompareAndSwap(ctx context.Context, id string, old ClaimVersion, rec ClaimRecord) (ClaimVersion, error) {
	if rec.ID != id {
		return 0, fmt.Errorf("bmc: claim %q: %w: record of %q", id, ErrBadClaim, rec.ID)
	}
	b, err := EncodeClaim(rec)
	if err != nil {
		return 0, fmt.Errorf("bmc: claim %q: %w", id, err)
	}
	ver, err := s.Register.CompareAndSwap(ctx, s.Key(id), casreg.Version(old), b)
	if errors.Is(err, casreg.ErrConflict) {
		return 0, fmt.Errorf("bmc: claim %q: %w", id, ErrClaimConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("bmc: claim %q: %w", id, err)
	}
	return ClaimVersion(ver), nil
}

// MemoryClaimStore is a ClaimStore in memory (a RegisterClaimStore over a casreg.Memory).
// The zero value is ready; it is safe for concurrent use. Records are kept for the life
// of the process.
type MemoryClaimStore struct {
	mem casreg.Memory
}

var _ ClaimStore = (*MemoryClaimStore)(nil)

func (s *MemoryClaimStore) store() *RegisterClaimStore { return &RegisterClaimStore{Register: &s.mem} }

// Get implements ClaimStore.
func (s *MemoryClaimStore) Get(ctx context.Context, id string) (ClaimRecord, ClaimVersion, error) {
	return s.store().Get(ctx, id)
}

// CompareAndSwap implements ClaimStore.
func (s *MemoryClaimStore) CompareAndSwap(ctx context.Context, id string, old ClaimVersion, rec ClaimRecord) (ClaimVersion, error) {
	return s.store().CompareAndSwap(ctx, id, old, rec)
}

// Len returns the number of records held.
func (s *MemoryClaimStore) Len() int { return s.mem.Len() }

// Limits of a stored claim record.
const (
	// MaxClaimSize is the largest encoded record ParseClaim accepts.
	MaxClaimSize = 8192
	// MaxIDLen is the longest command id, op, node or journal id a record may hold.
	MaxIDLen = 256
	// MaxMessageLen is the longest outcome message a record keeps (longer ones are cut).
	MaxMessageLen = 2048
)

// ErrBadClaim: a stored claim record does not parse or is not valid.
var ErrBadClaim = errors.New("bmc: bad claim record")

type claimJSON struct {
	V       int    `json:"v"`
	ID      string `json:"id"`
	Op      string `json:"op,omitempty"`
	State   string `json:"state"`
	Node    string `json:"node,omitempty"`
	Journal string `json:"journal,omitempty"`
	Status  string `json:"status,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Updated string `json:"updated,omitempty"`
}

func (r ClaimRecord) validate() error {
	if r.ID == "" {
		return fmt.Errorf("%w: empty id", ErrBadClaim)
	}
	for _, f := range []string{r.ID, r.Op, r.Node, r.Journal, r.Outcome.Kind, r.Outcome.Code} {
		if len(f) > MaxIDLen || !utf8.ValidString(f) {
			return fmt.Errorf("%w: a field is too long or not UTF-8", ErrBadClaim)
		}
	}
	if !utf8.ValidString(r.Outcome.Message) {
		return fmt.Errorf("%w: message not UTF-8", ErrBadClaim)
	}
	switch r.State {
	case ClaimIssued, ClaimGranted:
		if r.Node == "" {
			return fmt.Errorf("%w: %s without a node", ErrBadClaim, r.State)
		}
	case ClaimReported:
		switch r.Outcome.Status {
		case StatusOK, StatusDiffers, StatusFailed, StatusUnknown, StatusNotSent:
		default:
			return fmt.Errorf("%w: reported with status %q", ErrBadClaim, r.Outcome.Status)
		}
	default:
		return fmt.Errorf("%w: state %q", ErrBadClaim, r.State)
	}
	return nil
}

// EncodeClaim returns a record's stored form (JSON), for stores that keep bytes. A message
// longer than MaxMessageLen is cut.
func EncodeClaim(r ClaimRecord) ([]byte, error) {
	r.Outcome.Message = cut(r.Outcome.Message, MaxMessageLen)
	if err := r.validate(); err != nil {
		return nil, err
	}
	j := claimJSON{V: 1, ID: r.ID, Op: r.Op, State: string(r.State), Node: r.Node, Journal: r.Journal,
		Status: string(r.Outcome.Status), Kind: r.Outcome.Kind, Code: r.Outcome.Code, Message: r.Outcome.Message}
	if !r.Updated.IsZero() {
		j.Updated = r.Updated.UTC().Format(time.RFC3339Nano)
	}
	return json.Marshal(j)
}

// ParseClaim parses a record's stored form. Anything malformed, oversized, of an unknown
// version or not valid is an error matching ErrBadClaim.
func ParseClaim(b []byte) (ClaimRecord, error) {
	if len(b) > MaxClaimSize {
		return ClaimRecord{}, fmt.Errorf("%w: %d bytes", ErrBadClaim, len(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var j claimJSON
	if err := dec.Decode(&j); err != nil {
		return ClaimRecord{}, fmt.Errorf("%w: %w", ErrBadClaim, err)
	}
	if dec.More() {
		return ClaimRecord{}, fmt.Errorf("%w: trailing data", ErrBadClaim)
	}
	if j.V != 1 {
		return ClaimRecord{}, fmt.Errorf("%w: version %d", ErrBadClaim, j.V)
	}
	r := ClaimRecord{ID: j.ID, Op: j.Op, State: ClaimState(j.State), Node: j.Node, Journal: j.Journal,
		Outcome: Outcome{Status: Status(j.Status), Kind: j.Kind, Code: j.Code, Message: j.Message}}
	if j.Updated != "" {
		t, err := time.Parse(time.RFC3339Nano, j.Updated)
		if err != nil {
			return ClaimRecord{}, fmt.Errorf("%w: updated: %w", ErrBadClaim, err)
		}
		r.Updated = t
	}
	if len(r.Outcome.Message) > MaxMessageLen {
		return ClaimRecord{}, fmt.Errorf("%w: message too long", ErrBadClaim)
	}
	if err := r.validate(); err != nil {
		return ClaimRecord{}, err
	}
	return r, nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// ClaimRequest is what an agent sends to claim an operation id.
type ClaimRequest struct {
	ID string
	Op string
	// Journal identifies the claiming agent's journal (FileJournal.ID): a claim is granted
	// again only to the same node with the same journal (its answer was lost), never to a
	// node that lost its journal and so cannot know whether it sent the operation.
	Journal string
}

// Grant is the answer to a claim.
type Grant struct {
	// Granted: the agent may send the operation.
	Granted bool
	// State, Node and Outcome describe the record when not granted: issued to another
	// node, granted to another, or reported (Outcome holds the recorded outcome).
	State   ClaimState
	Node    string
	Outcome Outcome
}

// Claimer is the agent's side of the claim protocol, carried by its link to the host.
type Claimer interface {
	// Claim asks for the right to send operation req.ID.
	Claim(ctx context.Context, req ClaimRequest) (Grant, error)
	// Report records how a granted operation ended. Reporting again is harmless.
	Report(ctx context.Context, req ClaimRequest, o Outcome) error
}

// RouteAction is what the control plane does with a command it routes.
type RouteAction string

// Route actions.
const (
	// RouteSend: send the command to the node routed to (issued to it now; an unclaimed
	// command issued to another node has moved). An agent answers a repeat from its journal.
	RouteSend RouteAction = "send"
	// RouteReuse: the outcome is recorded; use it and send nothing.
	RouteReuse RouteAction = "reuse"
	// RouteUnknown: another node claimed the command and never reported how it ended; it
	// is not sent again. The host decides (a bmc query is always safe).
	RouteUnknown RouteAction = "unknown"
)

// RouteDecision is ClaimRegistry.Route's answer.
type RouteDecision struct {
	Action RouteAction
	// Node is the node the command is issued or granted to.
	Node string
	// Outcome is the recorded outcome (RouteReuse), or StatusUnknown (RouteUnknown).
	Outcome Outcome
}

// DefaultClaimRetries is how often ClaimRegistry retries a compare-and-swap that lost a
// race, when ClaimRegistry.Retries is zero.
const DefaultClaimRetries = 16

// ClaimRegistry is the control plane's side of the claim protocol, over a ClaimStore. It
// is safe for concurrent use, also by several control-plane processes on one store.
type ClaimRegistry struct {
	// Store holds the records. Required.
	Store ClaimStore
	// Clock is the clock for ClaimRecord.Updated; nil means [clock.Real].
	Clock clock.Clock
	// Retries bounds compare-and-swap retries per call; zero means DefaultClaimRetries.
	Retries int
	// RequireRoute grants a claim only on a command Route issued to the claiming node: a
	// claim on an id with no record is refused with an error matching ErrNotRouted (and
	// writes nothing), so a node cannot take the grant of a command it was never given.
	// False grants a never-routed id to the first node that claims it, for hosts that do
	// not route (an agent alone with its host).
	RequireRoute bool
}

// update reads id's record, lets fn decide, and writes fn's record when it returns one,
// retrying on conflicts.
func (r *ClaimRegistry) update(ctx context.Context, id string, fn func(rec ClaimRecord) (*ClaimRecord, error)) error {
	if id == "" || len(id) > MaxIDLen {
		return &OpError{Op: "claim", Kind: ErrInvalid, Message: "a command id of 1 to 256 bytes is required"}
	}
	tries := r.Retries
	if tries <= 0 {
		tries = DefaultClaimRetries
	}
	var err error
	for range tries {
		var rec ClaimRecord
		var ver ClaimVersion
		rec, ver, err = r.Store.Get(ctx, id)
		if err != nil {
			return err
		}
		rec.ID = id
		next, ferr := fn(rec)
		if ferr != nil || next == nil {
			return ferr
		}
		next.Updated = r.now()
		if _, err = r.Store.CompareAndSwap(ctx, id, ver, *next); err == nil || !errors.Is(err, ErrClaimConflict) {
			return err
		}
	}
	return err
}

func (r *ClaimRegistry) now() time.Time { return clock.Or(r.Clock).Now() }

// Route decides what to do with command id (of kind op) that the control plane routes to
// node, the lease holder or else the first connected agent: send it (issuing it to node,
// moving it from another node that never claimed it), reuse its recorded outcome, or
// report it as unknown (claimed by another node, never reported).
func (r *ClaimRegistry) Route(ctx context.Context, id, op, node string) (RouteDecision, error) {
	if node == "" {
		return RouteDecision{}, &OpError{Op: "route", Kind: ErrInvalid, Message: "no node to route to"}
	}
	var d RouteDecision
	err := r.update(ctx, id, func(rec ClaimRecord) (*ClaimRecord, error) {
		switch rec.State {
		case ClaimReported:
			d = RouteDecision{Action: RouteReuse, Node: rec.Node, Outcome: rec.Outcome}
			return nil, nil
		case ClaimGranted:
			if rec.Node == node {
				d = RouteDecision{Action: RouteSend, Node: node}
			} else {
				d = RouteDecision{Action: RouteUnknown, Node: rec.Node, Outcome: Outcome{Status: StatusUnknown,
					Kind: KindName(ErrOutcomeUnknown), Message: "claimed by " + quote(rec.Node) + ", which never reported how it ended"}}
			}
			return nil, nil
		case ClaimIssued:
			d = RouteDecision{Action: RouteSend, Node: node}
			if rec.Node == node {
				return nil, nil
			}
		default:
			d = RouteDecision{Action: RouteSend, Node: node}
			rec.Op = op
		}
		rec.State, rec.Node = ClaimIssued, node
		return &rec, nil
	})
	return d, err
}

// Claim answers node's claim: granted when id is issued to node or has no record, or when
// node already holds the grant with the same journal (a repeat whose answer was lost).
func (r *ClaimRegistry) Claim(ctx context.Context, node string, req ClaimRequest) (Grant, error) {
	if node == "" {
		return Grant{}, &OpError{Op: "claim", Kind: ErrInvalid, Message: "claim without a node"}
	}
	var g Grant
	err := r.update(ctx, req.ID, func(rec ClaimRecord) (*ClaimRecord, error) {
		g = Grant{State: rec.State, Node: rec.Node, Outcome: rec.Outcome}
		switch rec.State {
		case ClaimReported:
			return nil, nil
		case ClaimGranted:
			if rec.Node != node {
				return nil, nil
			}
			if rec.Journal == req.Journal {
				g.Granted = true
				return nil, nil
			}
			// The node lost the journal it claimed with: nobody can know any more whether
			// the operation was sent. That is the outcome.
			rec.State = ClaimReported
			rec.Outcome = Outcome{Status: StatusUnknown, Kind: KindName(ErrOutcomeUnknown),
				Message: "claimed by " + quote(node) + " under a journal it no longer has"}
			g = Grant{State: ClaimReported, Node: node, Outcome: rec.Outcome}
			return &rec, nil
		case ClaimIssued:
			if rec.Node != node {
				return nil, nil
			}
		default:
			if r.RequireRoute {
				return nil, &OpError{Op: "claim", Kind: ErrInvalid, Err: ErrNotRouted,
					Message: "command " + quote(req.ID) + " was never routed to " + quote(node)}
			}
			rec.Op = req.Op
		}
		rec.State, rec.Node, rec.Journal = ClaimGranted, node, req.Journal
		g = Grant{Granted: true, State: ClaimGranted, Node: node}
		return &rec, nil
	})
	return g, err
}

// Report records the outcome of the claim node holds. A repeat of a recorded report is a
// no-op; a report from a node that does not hold the grant is ErrInvalid.
func (r *ClaimRegistry) Report(ctx context.Context, node string, req ClaimRequest, o Outcome) error {
	o.Message = cut(o.Message, MaxMessageLen)
	return r.update(ctx, req.ID, func(rec ClaimRecord) (*ClaimRecord, error) {
		switch {
		case rec.State == ClaimReported && rec.Node == node:
			return nil, nil
		case rec.State != ClaimGranted || rec.Node != node || rec.Journal != req.Journal:
			return nil, &OpError{Op: "report", Kind: ErrInvalid, Message: "no grant of " + quote(req.ID) + " held by " + quote(node)}
		}
		rec.State, rec.Outcome = ClaimReported, o
		return &rec, nil
	})
}

// For returns the Claimer of node for an agent in the same process (tests, an embedded
// control plane). A remote agent's link carries the same calls.
func (r *ClaimRegistry) For(node string) Claimer { return registryClaimer{r, node} }

type registryClaimer struct {
	r    *ClaimRegistry
	node string
}

func (c registryClaimer) Claim(ctx context.Context, req ClaimRequest) (Grant, error) {
	return c.r.Claim(ctx, c.node, req)
}

func (c registryClaimer) Report(ctx context.Context, req ClaimRequest, o Outcome) error {
	return c.r.Report(ctx, c.node, req, o)
}

// ClaimAnswer is how an agent's claim was answered, for a host's counters.
type ClaimAnswer string

// Claim answers.
const (
	// ClaimAnswerGranted: the operation may be sent.
	ClaimAnswerGranted ClaimAnswer = "granted"
	// ClaimAnswerRefused: another node holds it (or it is issued to another): not sent.
	ClaimAnswerRefused ClaimAnswer = "refused"
	// ClaimAnswerReused: already reported (by this node or another): its outcome stands.
	ClaimAnswerReused ClaimAnswer = "reused"
	// ClaimAnswerUnanswered: the claim failed (the link, the host): not sent, retryable.
	ClaimAnswerUnanswered ClaimAnswer = "unanswered"
)

// AnswerOf classifies the answer to a claim: g and err as Claimer.Claim returned them.
func AnswerOf(g Grant, err error) ClaimAnswer {
	switch {
	case err != nil:
		return ClaimAnswerUnanswered
	case g.Granted:
		return ClaimAnswerGranted
	case g.State == ClaimReported:
		return ClaimAnswerReused
	}
	return ClaimAnswerRefused
}

// ClaimerFuncs adapts two functions to Claimer: the agent's side of the claim protocol
// over whatever link carries it (the link adds the node's name). Both are required.
type ClaimerFuncs struct {
	ClaimFunc  func(ctx context.Context, req ClaimRequest) (Grant, error)
	ReportFunc func(ctx context.Context, req ClaimRequest, o Outcome) error
}

var _ Claimer = ClaimerFuncs{}

// Claim calls ClaimFunc.
func (f ClaimerFuncs) Claim(ctx context.Context, req ClaimRequest) (Grant, error) {
	return f.ClaimFunc(ctx, req)
}

// Report calls ReportFunc.
func (f ClaimerFuncs) Report(ctx context.Context, req ClaimRequest, o Outcome) error {
	return f.ReportFunc(ctx, req, o)
}

// ErrNotRouted: a claim on a command id that the ClaimRegistry never routed to the
// claiming node (with RequireRoute). A control plane answers it as forbidden: the claimer
// read or made up an id that is not its to run.
var ErrNotRouted = errors.New("bmc: command not routed to this node")
