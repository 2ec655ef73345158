package agent

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
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
	claims   map[string]uint64    // by answer: granted, refused, reused, unanswered
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

// The answers a claim gets, as siteboot_bmc_claims_total counts them.
const (
	claimGranted    = "granted"    // the operation may be sent
	claimRefused    = "refused"    // another node holds it: not sent
	claimReused     = "reused"     // already reported (by this node or another): its outcome stands
	claimUnanswered = "unanswered" // the link failed: not sent, retryable
)

func (s *bmcStats) claim(answer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claims == nil {
		s.claims = map[string]uint64{}
	}
	s.claims[answer]++
}

// snapshot copies the counters.
func (s *bmcStats) snapshot() (ops map[[2]string]uint64, replayed, claims map[string]uint64) {
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
		Now:           a.clock.Now,
	}
	if b.link != nil {
		b.exec.Claims = linkClaimer{b.link, a.cfg.NodeID, &b.stats}
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

// linkClaimer is the Executor's Claimer over the link; it counts the answers.
type linkClaimer struct {
	l     BMCLink
	node  string
	stats *bmcStats
}

func (c linkClaimer) Claim(ctx context.Context, req bmc.ClaimRequest) (bmc.Grant, error) {
	g, err := c.l.Claim(ctx, c.node, req)
	switch {
	case err != nil:
		c.stats.claim(claimUnanswered)
	case g.Granted:
		c.stats.claim(claimGranted)
	case g.State == bmc.ClaimReported:
		c.stats.claim(claimReused)
	default:
		c.stats.claim(claimRefused)
	}
	return g, err
}

func (c linkClaimer) Report(ctx context.Context, req bmc.ClaimRequest, o bmc.Outcome) error {
	return c.l.ReportClaim(ctx, c.node, req, o)
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

// run carries out one bmc.* command and returns its result.
func (b *bmcAccess) run(ctx context.Context, c sitelink.Command) sitelink.BMCResult {
	res := sitelink.BMCResult{ID: c.ID, Kind: c.Kind}
	fail := func(kind error, msg string) sitelink.BMCResult {
		o := bmc.OutcomeOf(&bmc.OpError{Op: c.Kind, Kind: kind, Message: msg})
		res.Status, res.ErrorKind, res.Message = string(bmc.StatusNotSent), o.Kind, o.Message
		return res
	}
	if c.BMC == nil {
		return fail(bmc.ErrInvalid, "command without a bmc body")
	}
	if b.link == nil {
		return fail(bmc.ErrUnsupported, "the agent's link carries no BMC access")
	}
	tg, err := targetRef(c.BMC.Target)
	if err != nil {
		return fail(bmc.ErrInvalid, err.Error())
	}
	op := bmc.Operation{ID: c.ID, Target: tg, Destructive: sitelink.Destructive(c.Kind)}
	var grant string // a firmware or media grant minted for this command
	switch c.Kind {
	case sitelink.KindBMCQuery:
		op.Name = "query"
		op.Do = func(ctx context.Context, d bmc.Driver) (any, error) { return b.query(ctx, d, &res) }
	case sitelink.KindBMCStorage:
		op.Name = "storage"
		op.Do = func(ctx context.Context, d bmc.Driver) (any, error) {
			s, ok := d.(bmc.StorageLister)
			if !ok {
				return nil, unsupported(d, "storage")
			}
			disks, err := s.Storage(ctx)
			res.Disks = sitelinkDisks(disks)
			return nil, err
		}
	case sitelink.KindBMCPower:
		a := bmc.PowerAction(c.BMC.Action)
		if !a.Valid() {
			return fail(bmc.ErrInvalid, fmt.Sprintf("unknown power action %q", c.BMC.Action))
		}
		op.Name = "power"
		op.Do = func(ctx context.Context, d bmc.Driver) (any, error) {
			p, ok := d.(bmc.PowerController)
			if !ok {
				return nil, unsupported(d, "power")
			}
			return nil, p.SetPower(ctx, a)
		}
	case sitelink.KindBMCBoot:
		dev := bmc.BootDevice{Target: bmc.BootTarget(c.BMC.Device), Mode: bmc.BootMode(c.BMC.Mode), Persistent: c.BMC.Persistent}
		if err := dev.Validate(); err != nil {
			return fail(bmc.ErrInvalid, fmt.Sprintf("boot device %q mode %q", c.BMC.Device, c.BMC.Mode))
		}
		op.Name = "set-boot"
		op.Do = func(ctx context.Context, d bmc.Driver) (any, error) {
			bc, ok := d.(bmc.BootController)
			if !ok {
				return nil, unsupported(d, "set-boot")
			}
			return nil, bc.SetBootDevice(ctx, dev)
		}
	case sitelink.KindBMCRotate:
		if c.BMC.NewCredential == "" {
			return fail(bmc.ErrInvalid, "rotation without a new credential")
		}
		op.Name = "rotate"
		op.Do = func(ctx context.Context, d bmc.Driver) (any, error) {
			r, ok := d.(bmc.CredentialRotator)
			if !ok {
				return nil, unsupported(d, "rotate")
			}
			user := c.BMC.Username
			if user == "" {
				cur, err := b.credential(ctx, tg.Credential)
				if err != nil {
					return nil, err
				}
				user = cur.Username
			}
			next, err := b.credential(ctx, c.BMC.NewCredential)
			if err != nil {
				return nil, err
			}
			err = r.RotatePassword(ctx, user, next.Password)
			// The account's secret changed (or may have): fetch it again next time.
			b.exec.Forget(tg.Credential)
			return nil, err
		}
	case sitelink.KindBMCFirmware, sitelink.KindBMCMediaInsert:
		d, err := imagecache.ParseDigest(c.BMC.SHA256)
		if err != nil {
			return fail(bmc.ErrInvalid, "sha256: want 64 lower-case hex digits")
		}
		if _, ok := b.a.cache.Lookup(d); !ok {
			return fail(bmc.ErrInvalid, "image "+d.String()+" is not in the cache")
		}
		// The URL is minted only when the operation is sent; it carries a grant, which never
		// goes into a log, a result or an error.
		url := func() (string, error) {
			g, err := b.a.cache.FirmwareGrant(d)
			if err != nil {
				return "", &bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: "no grant for the image"}
			}
			grant = g.Token
			return b.a.bmcCacheBase() + "/t/" + g.Token + "/" + d.String(), nil
		}
		if c.Kind == sitelink.KindBMCFirmware {
			op.Name = "firmware"
			op.Do = func(ctx context.Context, drv bmc.Driver) (any, error) {
				f, ok := drv.(bmc.FirmwareUpdater)
				if !ok {
					return nil, unsupported(drv, "firmware")
				}
				u, err := url()
				if err != nil {
					return nil, err
				}
				fr, err := f.UpdateFirmware(ctx, bmc.FirmwareUpdate{URL: u, Targets: c.BMC.Components})
				sfr := sitelink.FirmwareResult(fr)
				res.Firmware = &sfr
				return nil, err
			}
		} else {
			op.Name = "media-insert"
			op.Do = func(ctx context.Context, drv bmc.Driver) (any, error) {
				m, ok := drv.(bmc.VirtualMediaController)
				if !ok {
					return nil, unsupported(drv, "media-insert")
				}
				u, err := url()
				if err != nil {
					return nil, err
				}
				return nil, m.InsertMedia(ctx, u)
			}
		}
	case sitelink.KindBMCMediaEject:
		op.Name = "media-eject"
		op.Do = func(ctx context.Context, d bmc.Driver) (any, error) {
			m, ok := d.(bmc.VirtualMediaController)
			if !ok {
				return nil, unsupported(d, "media-eject")
			}
			return nil, m.EjectMedia(ctx)
		}
	}
	r := b.exec.Run(ctx, op)
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
		res.Power, res.Inventory, res.Disks, res.Firmware = "", nil, nil, nil
	}
	return res
}

// query reads the power state and inspects the machine, keeping what it read when a part
// fails.
func (b *bmcAccess) query(ctx context.Context, d bmc.Driver, res *sitelink.BMCResult) (any, error) {
	var errs []error
	if p, ok := d.(bmc.PowerController); ok {
		st, err := p.PowerState(ctx)
		if err != nil {
			errs = append(errs, err)
		} else {
			res.Power = string(st)
		}
	}
	in, ok := d.(bmc.Inspector)
	if !ok {
		return nil, errors.Join(errs...)
	}
	inv, err := in.Inspect(ctx)
	var pe *bmc.PartialError
	if err != nil && !errors.As(err, &pe) {
		return nil, errors.Join(append(errs, err)...)
	}
	out := &sitelink.BMCInventory{Manufacturer: inv.Manufacturer, Model: inv.Model, Serial: inv.Serial, NICsKnown: inv.NICsKnown}
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
	if pe != nil {
		out.Failed = pe.Failed()
		errs = append(errs, err)
	}
	res.Inventory = out
	return nil, errors.Join(errs...)
}

func unsupported(d bmc.Driver, op string) error {
	return &bmc.OpError{Driver: d.Name(), Op: op, Kind: bmc.ErrUnsupported, Message: "the " + d.Name() + " driver has no " + op}
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

func sitelinkDisks(disks []bmc.Disk) []sitelink.Disk {
	out := make([]sitelink.Disk, 0, len(disks))
	for _, d := range disks {
		out = append(out, sitelink.Disk(d))
	}
	return out
}
