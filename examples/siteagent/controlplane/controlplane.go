// Package controlplane is a small control plane for site agents: enough of one to run
// examples/bootlab and the agent's tests. It keeps each agent's desired state (boot entries,
// cache images), issues discovery tokens, runs the boot lease's controller over a
// lease.Store, and answers the agent's heartbeats in process or over HTTP+JSON.
//
// It speaks the protocol of package sitelink: its messages are sitelink's and
// [Plane.Handler] is a sitelink.Handler over the plane; [LocalLink] carries the same
// messages in process. It never imports the agent, so a control plane built on it links
// none of the agent's serving code (proxy DHCP, TFTP, the cache, the BMC drivers).
//
// # Who is calling
//
// [Plane.Handler] serves the agents' API over mutual TLS ([Plane.TLSServer]): it takes the
// calling node from its verified client certificate (sitetls.NodeFrom, in
// sitelink.Handler), never from the request, and refuses with 403, counted in
// [Plane.Stats], a request without one, a report in another node's or site's name, a
// request from a node that is not enrolled, and a token asked for another node. A node
// gets only its own commands, its own lease word and the tokens of the entries sent to it.
// A BMC credential goes only to the node a live bmc.* command naming it is routed to, and
// a claim on a command is taken only from that node (403, counted, for anyone else); a
// result for the command counts only from that node too. Command ids are random (128
// bits), so one agent's acknowledgements cannot be guessed for another.
//
// [Plane.InsecureHandler] is the same API for a lab whose agents run with control.insecure:
// it trusts the node a request names, as anyone who reaches it can name any node.
//
// A real control plane (the seed's gateway and SiteBoot controller) does the same with a
// database; this one keeps everything in memory.
package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
)

// DefaultSessionTimeout is how long after its last heartbeat an agent still counts as
// connected.
const DefaultSessionTimeout = 3 * time.Second

// Plane is the control plane. Set the exported fields before Run or Handler.
type Plane struct {
	// Lease is the lease store; New sets a lease.MemoryStore.
	Lease lease.Store
	// TTL of the boot lease; zero: lease.DefaultTTL.
	TTL time.Duration
	// Interval of the lease tick; zero: lease.DefaultInterval.
	Interval time.Duration
	// SessionTimeout: zero means DefaultSessionTimeout.
	SessionTimeout time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
	// Clock is the plane's time: the lease records and the agents' sessions. Nil means
	// clock.Real. A test shares one fake clock with its agents.
	Clock clock.Clock
	// ClaimStore keeps the BMC claims (bmc.go); nil means a bmc.MemoryClaimStore. Set it
	// before the first heartbeat.
	ClaimStore bmc.ClaimStore
	// OnBMCReport, when set, is called after an agent's claim report was recorded, with
	// the command it reports on (a host's metrics; the demo's failover).
	OnBMCReport func(node string, c sitelink.Command, o bmc.Outcome)
	// OnBMCClaim, when set, is called after a claim was granted to an agent and recorded,
	// before the agent hears the answer, with the command claimed, or for a transition's
	// step a Command holding only the step's id (a test that stops the agent between its
	// claim and its operation).
	OnBMCClaim func(node string, c sitelink.Command)

	mu       sync.Mutex
	agents   map[string]*agentState           // by node id
	tokens   map[string]string                // workflow/ref -> bearer
	images   map[string][]sitelink.CacheImage // by site
	ctrlOnce sync.Once
	ctrl     *lease.Controller
	bmcs     bmcPlane // bmc.* commands and claims (bmc.go)
	refused  refusals
}

// refusals counts the requests Handler refused, by reason.
type refusals struct {
	noCert, otherNode, unknown, notRouted atomic.Uint64
}

// Stats are the plane's counters of refused requests.
type Stats struct {
	// RefusedNoIdentity counts requests without a verified client certificate naming a node.
	RefusedNoIdentity uint64
	// RefusedOtherNode counts requests in the name of another node or site than the
	// certificate's: a forged report or acknowledgement, a heartbeat for another agent, a
	// token asked for another agent's machine.
	RefusedOtherNode uint64
	// RefusedUnknown counts requests from nodes that are not enrolled.
	RefusedUnknown uint64
	// RefusedNotRouted counts BMC claims and credential requests from a node no live
	// command of that id, or naming that credential, is routed to.
	RefusedNotRouted uint64
}

// Stats returns the counters.
func (p *Plane) Stats() Stats {
	return Stats{RefusedNoIdentity: p.refused.noCert.Load(), RefusedOtherNode: p.refused.otherNode.Load(), RefusedUnknown: p.refused.unknown.Load(), RefusedNotRouted: p.refused.notRouted.Load()}
}

type agentState struct {
	site       string
	node       string
	lastSeen   time.Time
	beat       uint64
	entries    []sitelink.ProxyDhcpEntry // what the agent should hold, for tokens
	pending    []sitelink.Command        // sent until acknowledged
	discovered []sitelink.DiscoveredMachine
	digest     string
	reports    []sitelink.ImageReport
	section    *sitelink.SectionStatus
}

// New returns a control plane with its defaults applied.
func New(logger *slog.Logger) *Plane {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Plane{Lease: &lease.MemoryStore{}, Logger: logger, agents: map[string]*agentState{}, tokens: map[string]string{}, images: map[string][]sitelink.CacheImage{}}
}

// Enroll registers a site agent.
func (p *Plane) Enroll(site, node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.agents[node]; !ok {
		p.agents[node] = &agentState{site: site, node: node}
	}
}

// PrepareRamdisk sends an agent boot entries (boot.prepareRamdisk) and mints a discovery
// token for each entry that names a token reference and has none yet. It returns the
// command id.
func (p *Plane) PrepareRamdisk(node string, entries []sitelink.ProxyDhcpEntry) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.agents[node]
	if a == nil {
		return ""
	}
	for _, e := range entries {
		a.entries = slices.DeleteFunc(a.entries, func(x sitelink.ProxyDhcpEntry) bool { return x.MAC == e.MAC })
		a.entries = append(a.entries, e)
		if e.TokenRef == "" {
			continue
		}
		k := e.Workflow + "/" + e.TokenRef
		if _, ok := p.tokens[k]; !ok {
			var b [16]byte
			rand.Read(b[:])
			p.tokens[k] = "bcjt_" + hex.EncodeToString(b[:])
		}
	}
	return p.command(a, sitelink.Command{Kind: sitelink.KindPrepareRamdisk, Entries: slices.Clone(entries)})
}

// CleanUp removes a workflow's entries from an agent (boot.cleanUp) and deletes their
// tokens. It returns the command id.
func (p *Plane) CleanUp(node, workflow string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.agents[node]
	if a == nil {
		return ""
	}
	a.entries = slices.DeleteFunc(a.entries, func(e sitelink.ProxyDhcpEntry) bool {
		if e.Workflow == workflow {
			delete(p.tokens, e.Workflow+"/"+e.TokenRef)
			return true
		}
		return false
	})
	return p.command(a, sitelink.Command{Kind: sitelink.KindCleanUp, Workflow: workflow})
}

// command queues c for a with a new id: 128 random bits, so that nobody learns or guesses
// another agent's command ids from its own.
func (p *Plane) command(a *agentState, c sitelink.Command) string {
	var b [16]byte
	rand.Read(b[:])
	c.ID = "cmd-" + hex.EncodeToString(b[:])
	a.pending = append(a.pending, c)
	return c.ID
}

// Pending returns the ids of an agent's commands not acknowledged yet.
func (p *Plane) Pending(node string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	if a := p.agents[node]; a != nil {
		for _, c := range a.pending {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// SetImages sets the cache images every agent of a site pre-warms.
func (p *Plane) SetImages(site string, images []sitelink.CacheImage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.images[site] = slices.Clone(images)
}

// TokenFor returns the bearer minted for an entry (what the ramdisk will present).
func (p *Plane) TokenFor(workflow, ref string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tokens[workflow+"/"+ref]
}

// Discovered returns the last discovered list an agent reported.
func (p *Plane) Discovered(node string) []sitelink.DiscoveredMachine {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.agents[node]; a != nil {
		return slices.Clone(a.discovered)
	}
	return nil
}

// Images returns the last cache report of an agent.
func (p *Plane) Images(node string) []sitelink.ImageReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.agents[node]; a != nil {
		return slices.Clone(a.reports)
	}
	return nil
}

// Section returns the site section's state from an agent's last report, and false before
// any report carried one.
func (p *Plane) Section(node string) (sitelink.SectionStatus, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.agents[node]; a != nil && a.section != nil {
		return *a.section, true
	}
	return sitelink.SectionStatus{}, false
}

// LeaseRecord returns the site's lease record.
func (p *Plane) LeaseRecord(ctx context.Context, site string) (lease.Record, error) {
	rec, _, err := p.Lease.Get(ctx, site)
	return rec, err
}

// LeaseChecker is the assertion verifier's lease check, over the lease package's Checker,
// with its refusals mapped onto the verifier's reasons.
func (p *Plane) LeaseChecker() assertion.LeaseChecker {
	checker := &lease.Checker{Store: p.Lease}
	return assertion.LeaseCheckerFunc(func(ctx context.Context, site, agent string, epoch uint64) error {
		err := checker.CheckEpoch(ctx, site, agent, epoch)
		switch {
		case errors.Is(err, lease.ErrStaleEpoch):
			return fmt.Errorf("%w: %w", assertion.ErrStaleEpoch, err)
		case errors.Is(err, lease.ErrNotHolder), errors.Is(err, lease.ErrLapsed):
			return fmt.Errorf("%w: %w", assertion.ErrNotLeaseHolder, err)
		}
		return err
	})
}

// Run runs the lease controller until ctx ends.
func (p *Plane) Run(ctx context.Context) error {
	return p.controller().Run(ctx)
}

// controller is the lease controller, made on first use from the fields set by then.
func (p *Plane) controller() *lease.Controller {
	p.ctrlOnce.Do(func() {
		p.ctrl = &lease.Controller{Store: p.Lease, Fleet: fleet{p}, TTL: p.TTL, Interval: p.Interval, Clock: p.Clock, Logger: p.Logger}
	})
	return p.ctrl
}

// Sync answers an agent's heartbeat: it records the report and returns the agent's desired
// state with the lease word for it.
func (p *Plane) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	p.mu.Lock()
	a := p.agents[r.Node]
	if a == nil || a.site != r.Site {
		p.mu.Unlock()
		return sitelink.SyncResponse{}, errUnknownAgent
	}
	a.lastSeen = p.now()
	a.beat = r.Beat
	if r.DiscoveredDigest != a.digest && r.Discovered != nil {
		a.discovered, a.digest = r.Discovered, r.DiscoveredDigest
	}
	a.reports = r.Images
	a.section = r.Section
	a.pending = slices.DeleteFunc(a.pending, func(c sitelink.Command) bool { return slices.Contains(r.Acked, c.ID) })
	d := sitelink.SyncResponse{SiteSpec: sitelink.SiteSpec{CacheImages: slices.Clone(p.images[a.site])}, Commands: slices.Clone(a.pending)}
	p.mu.Unlock()

	// Tick the site's lease now, so that a renewal answers this very heartbeat. With only the
	// periodic tick, the word an agent gets can answer a heartbeat up to a tick and a
	// heartbeat old, and with the default TTL, tick and heartbeat the holder's fence would
	// lapse for a moment in some phases. A conflict with the periodic tick is harmless: the
	// record read below is whichever write won.
	if _, err := p.controller().TickSite(ctx, r.Site); err != nil && !errors.Is(err, lease.ErrConflict) {
		p.Logger.Warn("lease tick on heartbeat", "site", r.Site, "err", err)
	}
	rec, _, err := p.Lease.Get(ctx, r.Site)
	if err != nil {
		return sitelink.SyncResponse{}, err
	}
	w := rec.WordFor(r.Node)
	d.Lease = sitelink.BootLeaseState{Holds: w.Holds, Epoch: w.Epoch, TTLMs: w.TTL.Milliseconds(), Beat: w.Beat, Holder: w.Holder}
	d.Commands = append(d.Commands, p.bmcSync(ctx, r, rec)...)
	return d, nil
}

// Token returns the bearer of the discovery token of node's entry of workflow with token
// reference ref; sitelink.ErrNotReady while there is none.
func (p *Plane) Token(ctx context.Context, node, workflow, ref string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.agents[node]
	if a == nil {
		return "", errUnknownAgent
	}
	for _, e := range a.entries {
		if e.Workflow == workflow && e.TokenRef == ref {
			if t, ok := p.tokens[workflow+"/"+ref]; ok {
				return t, nil
			}
		}
	}
	return "", sitelink.ErrNotReady
}

// errUnknownAgent: the node is not enrolled (at that site). It is a sitelink.ErrForbidden.
var errUnknownAgent = fmt.Errorf("controlplane: unknown agent: %w", sitelink.ErrForbidden)

type fleet struct{ p *Plane }

func (f fleet) Sites(ctx context.Context) ([]string, error) {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	var sites []string
	for _, a := range f.p.agents {
		if !slices.Contains(sites, a.site) {
			sites = append(sites, a.site)
		}
	}
	slices.Sort(sites)
	return sites, nil
}

func (f fleet) Connected(ctx context.Context, site string) ([]lease.Agent, error) {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	timeout := f.p.SessionTimeout
	if timeout == 0 {
		timeout = DefaultSessionTimeout
	}
	now := f.p.now()
	var out []lease.Agent
	for _, a := range f.p.agents {
		if a.site == site && !a.lastSeen.IsZero() && now.Sub(a.lastSeen) < timeout {
			out = append(out, lease.Agent{Node: a.node, Site: a.site, Beat: a.beat})
		}
	}
	return out, nil
}

// now is the plane's wall clock.
func (p *Plane) now() time.Time {
	if p.Clock == nil {
		return time.Now()
	}
	return p.Clock.Now()
}

// TLSServer returns an HTTP server for Handler over mutual TLS with creds (the control
// plane's server certificate and the CA its agents' certificates chain to). Serve it with
// srv.ServeTLS(ln, "", "").
func (p *Plane) TLSServer(creds *sitetls.Credentials) *http.Server {
	return &http.Server{
		Handler: p.Handler(), TLSConfig: creds.ServerConfig(),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 8 << 10,
		ErrorLog:       slog.NewLogLogger(p.Logger.Handler(), slog.LevelDebug),
	}
}

// Handler serves the agents' API (the sitelink HTTP binding) over mutual TLS: the caller is
// the node its verified client certificate names (see "Who is calling" in the package doc).
func (p *Plane) Handler() http.Handler { return p.handler(false) }

// InsecureHandler serves the agents' API to agents on plain http (control.insecure): it
// trusts the node each request names.
func (p *Plane) InsecureHandler() http.Handler {
	p.Logger.Warn("control plane API without client certificates: any caller may speak for any node")
	return p.handler(true)
}

func (p *Plane) handler(insecure bool) http.Handler {
	s := linkServer{p}
	return &sitelink.Handler{Server: s, BMC: s, Insecure: insecure, Logger: p.Logger,
		OnRefused: func(r *http.Request, why sitelink.Refusal) {
			switch why {
			case sitelink.RefusedNoIdentity:
				p.refused.noCert.Add(1)
			case sitelink.RefusedOtherNode:
				p.refused.otherNode.Add(1)
			}
		}}
}

// linkServer answers the sitelink.Handler: sitelink.Server and sitelink.BMCServer over the
// plane.
type linkServer struct{ p *Plane }

var (
	_ sitelink.Server    = linkServer{}
	_ sitelink.BMCServer = linkServer{}
)

// enrolled refuses, counted, a verified caller that is not enrolled at its certificate's
// site.
func (s linkServer) enrolled(peer sitelink.Peer) error {
	if !peer.Verified {
		return nil
	}
	s.p.mu.Lock()
	a := s.p.agents[peer.Node]
	s.p.mu.Unlock()
	if a == nil || a.site != peer.Site {
		s.p.refused.unknown.Add(1)
		s.p.Logger.Warn("request refused: node not enrolled", "site", peer.Site, "node", peer.Node)
		return errUnknownAgent
	}
	return nil
}

func (s linkServer) Sync(ctx context.Context, peer sitelink.Peer, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	if err := s.enrolled(peer); err != nil {
		return sitelink.SyncResponse{}, err
	}
	return s.p.Sync(ctx, r)
}

func (s linkServer) Token(ctx context.Context, peer sitelink.Peer, q sitelink.TokenRequest) (sitelink.TokenResponse, error) {
	if err := s.enrolled(peer); err != nil {
		return sitelink.TokenResponse{}, err
	}
	t, err := s.p.Token(ctx, q.Node, q.Workflow, q.Ref)
	return sitelink.TokenResponse{Token: t}, err
}

func (s linkServer) Claim(ctx context.Context, peer sitelink.Peer, q sitelink.ClaimRequest) (sitelink.Grant, error) {
	if err := s.enrolled(peer); err != nil {
		return sitelink.Grant{}, err
	}
	return s.p.linkClaim(ctx, q)
}

func (s linkServer) ReportClaim(ctx context.Context, peer sitelink.Peer, q sitelink.ClaimRequest) error {
	if err := s.enrolled(peer); err != nil {
		return err
	}
	return s.p.linkReport(ctx, q)
}

func (s linkServer) Credential(ctx context.Context, peer sitelink.Peer, q sitelink.CredentialRequest) (sitelink.Credential, error) {
	if err := s.enrolled(peer); err != nil {
		return sitelink.Credential{}, err
	}
	return s.p.linkCredential(q)
}

// linkError maps the claim registry's refusal (a report of a grant the node does not hold)
// onto the binding's 403.
func linkError(err error) error {
	if errors.Is(err, bmc.ErrInvalid) {
		return fmt.Errorf("%w: %w", sitelink.ErrForbidden, err)
	}
	return err
}

// linkClaim, linkReport and linkCredential are the BMC half of an agent's link in the
// link's messages (sitelink.BMCLink), for both the HTTP handler and the LocalLink.
func (p *Plane) linkClaim(ctx context.Context, q sitelink.ClaimRequest) (sitelink.Grant, error) {
	g, err := p.claim(ctx, q.Node, bmc.ClaimRequest{ID: q.ID, Op: q.Op, Journal: q.Journal})
	if err != nil {
		return sitelink.Grant{}, linkError(err)
	}
	return sitelink.Grant{Granted: g.Granted, State: string(g.State), Node: g.Node, Outcome: sitelink.OutcomeOf(g.Outcome)}, nil
}

func (p *Plane) linkReport(ctx context.Context, q sitelink.ClaimRequest) error {
	if q.Outcome == nil {
		return fmt.Errorf("%w: a claim report needs an outcome", sitelink.ErrBadRequest)
	}
	return linkError(p.reportClaim(ctx, q.Node, bmc.ClaimRequest{ID: q.ID, Op: q.Op, Journal: q.Journal}, q.Outcome.BMC()))
}

func (p *Plane) linkCredential(q sitelink.CredentialRequest) (sitelink.Credential, error) {
	c, err := p.credential(q.Node, q.Ref)
	if err != nil {
		return sitelink.Credential{}, err
	}
	return sitelink.Credential{Username: c.Username, Password: c.Password}, nil
}

// convert copies in to out through JSON, as over the wire: nothing is shared by reference.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
