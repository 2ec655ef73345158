package agent

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/sitelink"
)

// BMCLink is what the link carries for BMC access besides Sync: the claim protocol
// (bmc.Claimer, for the node) and credentials by reference. A Link without it runs no bmc.*
// command: each is reported not sent.
type BMCLink interface {
	// Claim asks for the right to send destructive operation req.ID.
	Claim(ctx context.Context, node string, req bmc.ClaimRequest) (bmc.Grant, error)
	// ReportClaim records how a granted operation ended.
	ReportClaim(ctx context.Context, node string, req bmc.ClaimRequest, o bmc.Outcome) error
	// Credential returns the credential ref names. The agent keeps it in memory only.
	Credential(ctx context.Context, node, ref string) (bmc.Credential, error)
}

// bmcAccess runs the agent's bmc.* commands on a bmc.Executor, off the sync loop: a BMC
// that hangs never holds the heartbeat or the boot path.
type bmcAccess struct {
	a       *Agent
	link    BMCLink // nil: the link carries no BMC access
	exec    *bmc.Executor
	journal *bmc.FileJournal

	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool                 // close has begun: nothing new starts
	running map[string]bool      // ids being run
	results []sitelink.BMCResult // finished, not yet in a report the control plane answered

	stats bmcStats
}

// bmcStats counts the agent's bmc.* commands for /metrics.
type bmcStats struct {
	mu       sync.Mutex
	ops      map[[2]string]uint64 // by kind and outcome (a bmc.Status)
	replayed map[string]uint64    // by kind: answered from the journal or a claim record
	claims   map[bmc.ClaimAnswer]uint64
}

func (s *bmcStats) op(r sitelink.BMCResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ops == nil {
		s.ops, s.replayed = map[[2]string]uint64{}, map[string]uint64{}
	}
	s.ops[[2]string{r.Kind, r.Status}]++
	if r.Replayed {
		s.replayed[r.Kind]++
	}
}

func (s *bmcStats) claim(answer bmc.ClaimAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claims == nil {
		s.claims = map[bmc.ClaimAnswer]uint64{}
	}
	s.claims[answer]++
}

// snapshot copies the counters.
func (s *bmcStats) snapshot() (ops map[[2]string]uint64, replayed map[string]uint64, claims map[bmc.ClaimAnswer]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.ops), maps.Clone(s.replayed), maps.Clone(s.claims)
}

// inFlight is the number of bmc.* commands being run: waiting for their BMC or a slot,
// claiming, or sent.
func (b *bmcAccess) inFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.running)
}

// setupBMC opens the BMC journal in the data dir and builds the executor.
func (a *Agent) setupBMC() error {
	j, err := bmc.OpenFileJournal(a.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("agent: bmc journal: %w", err)
	}
	if d, ok := j.Damage(); ok {
		// The journal set its damaged file aside and refuses destructive operations until an
		// operator clears it; queries and booting go on.
		a.log.Error("BMC journal damaged: destructive bmc.* commands are refused until an operator clears it",
			"set_aside", d.SetAside, "reason", d.Reason, "kept", d.Kept, "lost", d.Lost,
			"clear", "rm "+filepath.Join(a.cfg.DataDir, bmc.JournalDamagedMarker))
	}
	b := &bmcAccess{a: a, journal: j, running: map[string]bool{}}
	b.link, _ = a.link.(BMCLink)
	opener := a.opt.BMCOpener
	if opener == nil {
		reg := bmc.NewRegistry()
		reg.Register(redfish.Name, redfish.Config{})
		reg.Register(ipmi.Name, ipmi.Config{})
		opener = reg
	}
	b.exec = &bmc.Executor{
		Opener:        opener,
		Credentials:   bmc.CredentialsFunc(b.credential),
		Journal:       j,
		MaxConcurrent: a.cfg.BMC.MaxConcurrent,
		Timeout:       a.cfg.BMC.Timeout,
		Logger:        a.log.With("component", "bmc"),
		Clock:         a.clock,
	}
	if b.link != nil {
		node := a.cfg.NodeID
		b.exec.Claims = bmc.ClaimerFuncs{
			ClaimFunc: func(ctx context.Context, req bmc.ClaimRequest) (bmc.Grant, error) {
				return b.link.Claim(ctx, node, req)
			},
			ReportFunc: func(ctx context.Context, req bmc.ClaimRequest, o bmc.Outcome) error {
				return b.link.ReportClaim(ctx, node, req, o)
			},
		}
		b.exec.OnClaim = func(_ bmc.ClaimRequest, answer bmc.ClaimAnswer) { b.stats.claim(answer) }
	}
	a.bmc = b
	return nil
}

func (b *bmcAccess) credential(ctx context.Context, ref string) (bmc.Credential, error) {
	if b.link == nil {
		return bmc.Credential{}, &bmc.OpError{Op: "credential", Kind: bmc.ErrAuth, Message: "the link carries no credentials"}
	}
	return b.link.Credential(ctx, b.a.cfg.NodeID, ref)
}

// command takes a bmc.* command from the desired state: it starts it unless it is running
// or its result waits to be reported, and reports whether c was a bmc.* command. BMC
// access works whether or not the agent holds the lease.
func (b *bmcAccess) command(ctx context.Context, c sitelink.Command) bool {
	if !sitelink.IsBMCKind(c.Kind) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running[c.ID] || slices.ContainsFunc(b.results, func(r sitelink.BMCResult) bool { return r.ID == c.ID }) {
		return true
	}
	if b.closed || ctx.Err() != nil {
		return true
	}
	b.running[c.ID] = true
	b.wg.Go(func() {
		r := b.run(ctx, c)
		b.stats.op(r)
		b.mu.Lock()
		delete(b.running, c.ID)
		if ctx.Err() == nil || r.Status != string(bmc.StatusNotSent) {
			b.results = append(b.results, r)
		}
		b.mu.Unlock()
		// The result goes back in the next report: ask for one now.
		b.a.reportSoon()
	})
	return true
}

// pending returns the results the next report carries.
func (b *bmcAccess) pending() []sitelink.BMCResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.results)
}

// delivered drops the results a report the control plane answered carried.
func (b *bmcAccess) delivered(sent []sitelink.BMCResult) {
	if len(sent) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.results = slices.DeleteFunc(b.results, func(r sitelink.BMCResult) bool {
		return slices.ContainsFunc(sent, func(s sitelink.BMCResult) bool { return s.ID == r.ID })
	})
}

// close waits for the operations in progress (their contexts have ended) and releases the
// journal.
func (b *bmcAccess) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
	b.journal.Close()
}

// run carries out one bmc.* command and returns its result: the command becomes a typed
// bmc operation (bmc.ParseOp), which the Executor journals, claims and sends through the
// driver capability it needs.
func (b *bmcAccess) run(ctx context.Context, c sitelink.Command) sitelink.BMCResult {
	res := sitelink.BMCResult{ID: c.ID, Kind: c.Kind}
	notSent := func(err error) sitelink.BMCResult {
		o := bmc.NotSent(err)
		res.Status, res.ErrorKind, res.Message = string(o.Status), o.Kind, o.Message
		return res
	}
	if c.BMC == nil {
		return notSent(&bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: "command without a bmc body"})
	}
	if b.link == nil {
		return notSent(&bmc.OpError{Op: c.Kind, Kind: bmc.ErrUnsupported, Message: "the agent's link carries no BMC access"})
	}
	tg, err := targetRef(c.BMC.Target)
	if err != nil {
		return notSent(&bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: err.Error()})
	}
	args := bmc.Args{Device: c.BMC.Device, Mode: c.BMC.Mode, Persistent: c.BMC.Persistent, Action: c.BMC.Action,
		Username: c.BMC.Username, NewCredential: c.BMC.NewCredential, Components: c.BMC.Components}
	var grant string // a firmware or media grant minted for this command
	if c.Kind == sitelink.KindBMCFirmware || c.Kind == sitelink.KindBMCMediaInsert {
		d, err := imagecache.ParseDigest(c.BMC.SHA256)
		if err != nil {
			return notSent(&bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: "sha256: want 64 lower-case hex digits"})
		}
		if _, ok := b.a.cache.Lookup(d); !ok {
			return notSent(&bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: "image " + d.String() + " is not in the cache"})
		}
		// The URL is minted only when the operation is sent; it carries a grant, which never
		// goes into a log, a result or an error.
		args.Image = func(context.Context) (string, error) {
			g, err := b.a.cache.FirmwareGrant(d)
			if err != nil {
				return "", &bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: "no grant for the image"}
			}
			grant = g.Token
			return b.a.bmcCacheBase() + "/t/" + g.Token + "/" + d.String(), nil
		}
	}
	op, err := bmc.ParseOp(c.Kind, args)
	if err != nil {
		return notSent(err)
	}
	r := b.exec.RunOp(ctx, c.ID, tg, op)
	if c.Kind == sitelink.KindBMCFirmware && grant != "" {
		// The update is over: the BMC has no more use for the URL.
		b.a.cache.Revoke(grant)
	}
	res.Status, res.ErrorKind, res.Code, res.Message, res.Replayed = string(r.Outcome.Status), r.Outcome.Kind, r.Outcome.Code, r.Outcome.Message, r.Replayed
	if grant != "" {
		res.Message = redactGrant(res.Message, grant)
	}
	if r.Replayed {
		// Nothing ran this time: what a run would have read is not there.
		return res
	}
	switch v := r.Value.(type) {
	case bmc.QueryResult:
		res.Power = string(v.Power)
		if v.Inspected {
			res.Inventory = inventory(v)
		}
	case []bmc.Disk:
		res.Disks = make([]sitelink.Disk, 0, len(v))
		for _, d := range v {
			res.Disks = append(res.Disks, sitelink.Disk(d))
		}
	case bmc.FirmwareResult:
		fr := sitelink.FirmwareResult(v)
		res.Firmware = &fr
	}
	return res
}

// inventory is what a query's inspection found, in the report's spelling.
func inventory(q bmc.QueryResult) *sitelink.BMCInventory {
	inv := q.Inventory
	out := &sitelink.BMCInventory{Manufacturer: inv.Manufacturer, Model: inv.Model, Serial: inv.Serial, NICsKnown: inv.NICsKnown, Failed: q.Failed}
	if inv.HasUUID {
		out.UUID = inv.UUID.String()
	}
	for _, n := range inv.NICs {
		out.MACs = append(out.MACs, n.MAC.String())
	}
	for _, a := range inv.HostAddrs {
		out.HostAddrs = append(out.HostAddrs, a.String())
	}
	for _, a := range inv.BMCAddrs {
		out.BMCAddrs = append(out.BMCAddrs, a.String())
	}
	if inv.BMCMAC != (hwid.MAC{}) {
		out.BMCMAC = inv.BMCMAC.String()
	}
	return out
}

// targetRef checks a command's target and turns it into the Executor's.
func targetRef(t sitelink.BMCTarget) (bmc.TargetRef, error) {
	if t.Driver == "" || t.Address == "" || len(t.Address) > 512 || len(t.Credential) > bmc.MaxIDLen {
		return bmc.TargetRef{}, errors.New("target: want a driver, an address and a credential reference")
	}
	ref := bmc.TargetRef{Driver: t.Driver, Address: t.Address, Credential: t.Credential, Insecure: t.Insecure}
	if t.CertSHA256 != "" {
		pin, err := hex.DecodeString(t.CertSHA256)
		if err != nil || len(pin) != 32 {
			return bmc.TargetRef{}, errors.New("target: cert_sha256 wants 64 hex digits")
		}
		ref.CertSHA256 = pin
	}
	return ref, nil
}

// redactGrant keeps a grant out of a message a BMC may have echoed the URL into.
func redactGrant(msg, grant string) string { return strings.ReplaceAll(msg, grant, "GRANT") }

// bmcCacheBase is where BMCs reach the image cache: BMC.CacheURL, else the machines' cache
// URL.
func (a *Agent) bmcCacheBase() string {
	if a.cfg.BMC.CacheURL != "" {
		return strings.TrimRight(a.cfg.BMC.CacheURL, "/")
	}
	return a.cacheBase()
}

// BMCConfig bounds the agent's BMC access.
type BMCConfig struct {
	// MaxConcurrent bounds the BMC operations in progress, across BMCs (one at a time per
	// BMC always); zero means bmc.DefaultMaxConcurrent.
	MaxConcurrent int
	// Timeout is each operation's deadline (the wait for its BMC, the claim, the login, the
	// operation, the logout); zero means bmc.DefaultOpTimeout.
	Timeout time.Duration
	// CacheURL is where BMCs reach the image cache for firmware and virtual media (their
	// management network may reach this host under another name); "" means the machines'
	// cache URL (Boot.CacheURL, or HTTPBase + "/cache").
	CacheURL string
}

func (c BMCConfig) validate() error {
	if c.MaxConcurrent < 0 || c.MaxConcurrent > 1024 {
		return &FieldError{Field: "BMC.MaxConcurrent", Err: fmt.Errorf("want 0 (default) to 1024, got %d", c.MaxConcurrent)}
	}
	if c.Timeout < 0 || c.Timeout > time.Hour {
		return &FieldError{Field: "BMC.Timeout", Err: fmt.Errorf("want 0 (default) to %v, got %v", time.Hour, c.Timeout)}
	}
	if c.CacheURL != "" {
		u, err := url.Parse(c.CacheURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return &FieldError{Field: "BMC.CacheURL", Err: fmt.Errorf("want an http(s) URL, got %q", c.CacheURL)}
		}
	}
	return nil
}

// journalDamaged reports whether the BMC journal is damaged (and refuses destructive
// operations).
func (b *bmcAccess) journalDamaged() bool {
	_, ok := b.journal.Damage()
	return ok
}
