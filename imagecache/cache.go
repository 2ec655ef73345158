package imagecache

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/bettercompute/siteboot/clock"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/internal/filelock"
)

// Defaults used when the matching Config field is zero.
const (
	DefaultConcurrentPulls     = 2
	DefaultStallTimeout        = 30 * time.Second
	DefaultMinRate             = 32 << 10 // bytes per second (256 kbit/s)
	DefaultRateWindow          = 30 * time.Second
	DefaultPullTimeout         = 10 * time.Minute
	DefaultRetries             = 4
	DefaultRetryDelay          = time.Second
	DefaultMaxRetryDelay       = time.Minute
	DefaultRetryFailedAfter    = 30 * time.Second
	DefaultMaxRetryFailedAfter = 15 * time.Minute
	DefaultBootGrantTTL        = 6 * time.Hour
	DefaultFirmwareGrantTTL    = 2 * time.Hour
	DefaultMaxGrants           = 1 << 16
)

// Config configures a Cache. Only Dir is required.
type Config struct {
	// Dir holds the cached images, each named by its digest's 64 hex digits. Created (0750)
	// when missing. One process at a time: Open locks it.
	Dir string

	// MaxBytes is the byte budget of the cached images and of the partial copies failed
	// pulls keep for a resume; each trim pass removes those partial copies first, then
	// least-recently-used images that are neither pinned nor being served, until the cache
	// fits. Zero: no budget. An image larger than MaxBytes is refused (ErrTooLarge).
	MaxBytes int64

	// Client pulls the images. Nil: a client of its own, dialling sources directly (no
	// proxy from the environment: the address checked must be the source's). A host's
	// client is copied and its transport's dialer wrapped by the source policy; see
	// "Image sources" in the package doc.
	Client *http.Client

	// AllowedSourceNetworks are networks image sources may be on although the source
	// policy would refuse them (a loopback mirror, a source on a management network).
	// Nil: none.
	AllowedSourceNetworks []netip.Prefix

	// ManagementNetworks are refused as image sources (the BMC networks), in addition to
	// loopback, link-local, unspecified, multicast and the host's own addresses, unless
	// AllowedSourceNetworks holds the address.
	ManagementNetworks []netip.Prefix

	// ConcurrentPulls bounds the pulls running at once. Zero: DefaultConcurrentPulls.
	ConcurrentPulls int

	// BootImages are the digests of the site's ramdisk kernel and initrd: re-verified first
	// after Open and pulled at PriorityBoot. Nil: none known (images named in SetPinned
	// still go before the rest).
	BootImages []Digest

	// IgnoreStamps makes Open hash every cached image again before serving it, as if none
	// had a verification stamp (see "Startup" in the package doc). False: an image whose
	// stamp matches its file is served at once.
	IgnoreStamps bool

	// StallTimeout ends an attempt when no byte (or no response header) came for this long.
	// Zero: DefaultStallTimeout.
	StallTimeout time.Duration

	// MinRate, in bytes per second, is the slowest a pull may go: an attempt that received
	// fewer than MinRate*RateWindow bytes in a RateWindow ends with ErrTooSlow, gives its
	// slot to whoever waits and is retried (resuming) like any failed attempt. Zero:
	// DefaultMinRate; negative: no minimum (and no deadline).
	MinRate int64

	// RateWindow is the span MinRate is measured over. Zero: DefaultRateWindow.
	RateWindow time.Duration

	// PullTimeout with MinRate sets each pull's deadline: PullTimeout plus the image's size
	// at MinRate, counted over the time spent in attempts and back-offs (not waiting for a
	// slot); past it the pull fails with ErrDeadline. Zero: DefaultPullTimeout; negative:
	// no deadline.
	PullTimeout time.Duration

	// Retries is how many times a failed attempt is retried (network errors, stalls, too
	// slow, short bodies, 5xx, 408, 429), resuming with a Range request where the source
	// allows it. A wrong digest, 4xx, a full disk, a too large image or a refused source are
	// not retried. Zero: DefaultRetries; negative: none.
	Retries int

	// RetryDelay is the wait before the first retry, doubled on each next one up to
	// MaxRetryDelay. Zero: DefaultRetryDelay and DefaultMaxRetryDelay.
	RetryDelay, MaxRetryDelay time.Duration

	// RetryFailedAfter is how long a failed pinned image stays failed before it is pulled
	// again (by the cache itself, or by SetPinned); it doubles with each consecutive failure
	// up to MaxRetryFailedAfter. Zero: DefaultRetryFailedAfter and
	// DefaultMaxRetryFailedAfter.
	RetryFailedAfter, MaxRetryFailedAfter time.Duration

	// Fence says whether this agent is the active boot server. Boot grants serve only while
	// it answers true; otherwise 503. Nil: boot grants never serve (fail closed).
	Fence Fence

	// BootGrantTTL is a boot grant's validity when it is issued without a not-after.
	// Zero: DefaultBootGrantTTL.
	BootGrantTTL time.Duration

	// FirmwareGrantTTL is a firmware grant's validity. Zero: DefaultFirmwareGrantTTL.
	FirmwareGrantTTL time.Duration

	// MaxGrants bounds the live grants held; expired ones are forgotten first.
	// Zero: DefaultMaxGrants.
	MaxGrants int

	// Rand is the source of grant tokens. Nil: crypto/rand.
	Rand io.Reader

	// Clock is the clock for grants, last-used times and the retries of failed images
	// (their timer is its AfterFunc). Nil: [clock.Real].
	Clock clock.Clock

	// Logger receives pull, eviction and refusal events. Nil: discard.
	Logger *slog.Logger

	// Events, if set, receives a bootevents.StageCache event per request ServeHTTP
	// answers under a grant: served (bytes, duration, the image's digest) or refused for
	// ReasonOf's word ("unknown-grant", "expired", "fenced", ...), from the requester's
	// address, by which a bootevents.Timeline finds the machine. Never the grant's token.
	// Nil builds none.
	Events bootevents.Sink
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("imagecache: Config.Dir is empty")
	case c.MaxBytes < 0:
		return errors.New("imagecache: Config.MaxBytes is negative")
	case c.ConcurrentPulls < 0:
		return errors.New("imagecache: Config.ConcurrentPulls is negative")
	case c.StallTimeout < 0, c.RetryDelay < 0, c.MaxRetryDelay < 0, c.RetryFailedAfter < 0,
		c.MaxRetryFailedAfter < 0, c.RateWindow < 0, c.BootGrantTTL < 0, c.FirmwareGrantTTL < 0:
		return errors.New("imagecache: a Config duration is negative")
	case c.MaxGrants < 0:
		return errors.New("imagecache: Config.MaxGrants is negative")
	}
	for _, p := range append(slices.Clip(c.AllowedSourceNetworks), c.ManagementNetworks...) {
		if !p.IsValid() {
			return errors.New("imagecache: an invalid network in Config.AllowedSourceNetworks or ManagementNetworks")
		}
	}
	return nil
}

// State is where an image stands.
type State int

// States of an image.
const (
	StateWarming   State = iota + 1 // queued or being pulled
	StateReady                      // verified and cached
	StateFailed                     // the last pull failed; Status.Err says why
	StateVerifying                  // cached before Open, being hashed again before it is served
)

func (s State) String() string {
	switch s {
	case StateWarming:
		return "warming"
	case StateReady:
		return "ready"
	case StateFailed:
		return "failed"
	case StateVerifying:
		return "verifying"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Status is one image's state.
type Status struct {
	Image Image
	State State
	Bytes int64     // bytes received so far (warming) or the size (ready)
	Total int64     // the full size when known, else -1
	Err   error     // why it failed (a *PullError), when failed
	Since time.Time // when the image entered this state

	Priority  Priority  // the priority its pull runs at
	Failures  int       // consecutive failed pulls
	NextRetry time.Time // when failed and pinned: when it is pulled again
}

// Item is one image in the cache's inventory.
type Item struct {
	Digest   Digest
	Size     int64
	Format   string    // from the Image that named it; "" until one does after a restart
	LastUsed time.Time // last served, or when it was cached
	Pinned   bool
	InUse    int // requests serving it now
}

// entry is a verified file in the cache.
type entry struct {
	size      int64
	format    string
	lastUsed  time.Time
	persisted time.Time // last time lastUsed was written to the file's mtime
	inUse     int
}

// image is the pull state of an image the host asked for.
type image struct {
	img       Image
	state     State
	bytes     int64
	total     int64
	err       error
	since     time.Time
	failures  int
	nextRetry time.Time
	// retryMono is nextRetry on Config.Clock's monotonic reading, so a step back of its
	// wall clock delays no retry.
	retryMono time.Duration
	seq       uint64 // its place in the slot queue while warming
}

// pendingFile is an image file found by Open that is not served until hashed again.
type pendingFile struct {
	size      int64
	mtime     time.Time
	verifying bool
	done      chan struct{} // closed once verified or removed
}

// Cache is a content-addressed image cache: verified pulls into a directory, LRU trimming
// under a byte budget with pins, and grant-gated serving (ServeHTTP).
type Cache struct {
	cfg      Config
	dir      string
	log      *slog.Logger
	clock    clock.Clock
	now      func() time.Time
	rand     io.Reader
	client   *http.Client
	policy   *sourcePolicy
	lockFile *os.File
	sched    *scheduler
	boot     map[Digest]bool

	ctx    context.Context // cancelled by Shutdown and Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sf     singleflight.Group

	closeOnce sync.Once
	verified  chan struct{} // closed when the re-verification after Open ended

	mu         sync.Mutex
	closed     bool
	entries    map[Digest]*entry
	pending    map[Digest]*pendingFile
	partials   map[Digest]int64 // partial copies kept for a resume, by size
	images     map[Digest]*image
	pinned     map[Digest]Image
	retryTimer clock.Timer

	grants grantTable
	stats  counters
}

// Open opens (or creates) the cache directory and scans it, without reading any image:
// temp files of interrupted writes are removed, partial copies kept with what a resume needs
// (the rest are removed), an image whose stamp matches the file is served at once, and the
// others are hashed again in the background (Config.BootImages first, then pinned images,
// smallest first) and served once they match (WaitVerified waits for that).
func Open(ctx context.Context, cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{
		cfg:      cfg,
		dir:      filepath.Clean(cfg.Dir),
		log:      cfg.Logger,
		clock:    clock.Or(cfg.Clock),
		now:      clock.Or(cfg.Clock).Now,
		rand:     cfg.Rand,
		entries:  map[Digest]*entry{},
		pending:  map[Digest]*pendingFile{},
		partials: map[Digest]int64{},
		images:   map[Digest]*image{},
		pinned:   map[Digest]Image{},
		boot:     map[Digest]bool{},
		verified: make(chan struct{}),
		policy:   &sourcePolicy{allow: slices.Clone(cfg.AllowedSourceNetworks), management: slices.Clone(cfg.ManagementNetworks)},
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.rand == nil {
		c.rand = rand.Reader
	}
	c.client = c.policy.guardClient(cfg.Client)
	for _, d := range cfg.BootImages {
		c.boot[d] = true
	}
	c.cfg.ConcurrentPulls = orDefault(cfg.ConcurrentPulls, DefaultConcurrentPulls)
	c.cfg.StallTimeout = orDefault(cfg.StallTimeout, DefaultStallTimeout)
	c.cfg.RetryDelay = orDefault(cfg.RetryDelay, DefaultRetryDelay)
	c.cfg.MaxRetryDelay = max(orDefault(cfg.MaxRetryDelay, DefaultMaxRetryDelay), c.cfg.RetryDelay)
	c.cfg.RetryFailedAfter = orDefault(cfg.RetryFailedAfter, DefaultRetryFailedAfter)
	c.cfg.MaxRetryFailedAfter = max(orDefault(cfg.MaxRetryFailedAfter, DefaultMaxRetryFailedAfter), c.cfg.RetryFailedAfter)
	c.cfg.MinRate = max(orDefault(cfg.MinRate, DefaultMinRate), 0)
	c.cfg.RateWindow = orDefault(cfg.RateWindow, DefaultRateWindow)
	c.cfg.PullTimeout = max(orDefault(cfg.PullTimeout, DefaultPullTimeout), 0)
	c.cfg.BootGrantTTL = orDefault(cfg.BootGrantTTL, DefaultBootGrantTTL)
	c.cfg.FirmwareGrantTTL = orDefault(cfg.FirmwareGrantTTL, DefaultFirmwareGrantTTL)
	c.cfg.MaxGrants = orDefault(cfg.MaxGrants, DefaultMaxGrants)
	switch {
	case cfg.Retries == 0:
		c.cfg.Retries = DefaultRetries
	case cfg.Retries < 0:
		c.cfg.Retries = 0
	}
	c.sched = newScheduler(c.cfg.ConcurrentPulls, func() { c.stats.preemptions.Add(1) })
	c.grants.init()

	if err := os.MkdirAll(c.dir, 0o750); err != nil {
		return nil, fmt.Errorf("imagecache: open: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(c.dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("imagecache: open: %w", err)
	}
	if err := filelock.TryLock(lf); err != nil {
		lf.Close()
		if errors.Is(err, filelock.ErrLocked) {
			return nil, fmt.Errorf("%w: %s: %w", ErrLocked, c.dir, err)
		}
		return nil, fmt.Errorf("imagecache: open: lock %s: %w", c.dir, err)
	}
	c.lockFile = lf
	if err := c.scan(ctx); err != nil {
		lf.Close()
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if len(c.pending) == 0 {
		close(c.verified)
	} else {
		c.wg.Add(1)
		go c.verifyLoop()
	}
	return c, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// scan sorts out the directory: temp files of interrupted writes removed, partial copies
// with their resume record kept, images whose stamp matches taken as verified and the rest
// left for verifyLoop. It reads no image.
func (c *Cache) scan(ctx context.Context) error {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("imagecache: scan: %w", err)
	}
	var images []Digest
	stamps, partials, metas := map[Digest]bool{}, map[Digest]int64{}, map[Digest]bool{}
	remove := func(name, why string) error {
		if err := removeQuiet(filepath.Join(c.dir, name)); err != nil {
			return fmt.Errorf("imagecache: scan: %w", err)
		}
		c.stats.tempRemoved.Add(1)
		c.log.Info("imagecache: removed "+why, "file", name)
		return nil
	}
	for _, de := range des {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := de.Name()
		kind, d := classify(name)
		if kind != nameLock && kind != nameOther && !de.Type().IsRegular() {
			c.log.Warn("imagecache: ignoring a cache name that is not a regular file", "file", name)
			continue
		}
		switch kind {
		case nameLock:
		case nameImage:
			images = append(images, d)
		case namePartial:
			fi, err := de.Info()
			if err != nil {
				continue
			}
			partials[d] = fi.Size()
		case nameMeta:
			metas[d] = true
		case nameStamp:
			stamps[d] = true
		case nameStaleTemp:
			if err := remove(name, "the temp file of an interrupted write"); err != nil {
				return err
			}
		default:
			c.log.Warn("imagecache: ignoring a file that is not an image", "file", name)
		}
	}
	isImage := map[Digest]bool{}
	for _, d := range images {
		isImage[d] = true
	}
	for d, size := range partials {
		name := tempPrefix + d.String()
		if _, ok := readMeta(c.metaPath(d)); !ok || !metas[d] || isImage[d] {
			// Without its record a partial copy cannot be resumed safely; beside a whole
			// image it is not needed.
			if err := remove(name, "a partial pull that cannot be resumed"); err != nil {
				return err
			}
			delete(metas, d)
			if err := removeQuiet(c.metaPath(d)); err != nil {
				return fmt.Errorf("imagecache: scan: %w", err)
			}
			continue
		}
		c.partials[d] = size
		c.log.Info("imagecache: kept a partial pull to resume", "sha256", d.String(), "bytes", size)
	}
	for d := range metas {
		if _, ok := c.partials[d]; !ok {
			if err := remove(tempPrefix+d.String()+metaSuffix, "the record of a pull that is gone"); err != nil {
				return err
			}
		}
	}
	for _, d := range images {
		fi, err := os.Stat(c.path(d))
		if err != nil {
			continue
		}
		if stamps[d] && !c.cfg.IgnoreStamps {
			if want, ok := readStamp(c.stampPath(d)); ok {
				if got, ok := stampOf(fi); ok && got == want {
					c.entries[d] = &entry{size: fi.Size(), lastUsed: fi.ModTime(), persisted: fi.ModTime()}
					c.stats.stampMatched.Add(1)
					continue
				}
			}
		}
		c.pending[d] = &pendingFile{size: fi.Size(), mtime: fi.ModTime(), done: make(chan struct{})}
	}
	for d := range stamps {
		if !isImage[d] {
			if err := remove(stampPrefix+d.String(), "the stamp of an image that is gone"); err != nil {
				return err
			}
		}
	}
	return syncDir(c.dir)
}

// priorityLocked is the priority of d's pull and of its re-verification. c.mu is held.
func (c *Cache) priorityLocked(d Digest) Priority {
	if c.boot[d] {
		return PriorityBoot
	}
	p := PriorityDefault
	if img, ok := c.pinned[d]; ok {
		p = max(img.Priority, PriorityPinned)
	}
	if st := c.images[d]; st != nil {
		p = max(p, st.img.Priority)
	}
	if p == PriorityDefault {
		p = PriorityRest
	}
	return p
}

// verifyLoop hashes the images Open could not take on their stamp, one at a time, the
// highest priority (then the smallest) first, so the site's kernel and initrd serve first.
func (c *Cache) verifyLoop() {
	defer c.wg.Done()
	defer close(c.verified)
	defer func() {
		// Shut down before the pass ended: whoever waits for an image is told.
		c.mu.Lock()
		for d, p := range c.pending {
			close(p.done)
			delete(c.pending, d)
		}
		c.mu.Unlock()
	}()
	for {
		c.mu.Lock()
		var next Digest
		var np *pendingFile
		var nprio Priority
		for d, p := range c.pending {
			if p.verifying {
				continue
			}
			prio := c.priorityLocked(d)
			if np == nil || prio > nprio || (prio == nprio && (p.size < np.size || (p.size == np.size && compareDigest(d, next) < 0))) {
				next, np, nprio = d, p, prio
			}
		}
		if np == nil || c.closed {
			c.mu.Unlock()
			return
		}
		np.verifying = true
		c.mu.Unlock()

		ok, err := c.verify(next)
		if err != nil && c.ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		delete(c.pending, next)
		close(np.done)
		if ok {
			c.entries[next] = &entry{size: np.size, lastUsed: np.mtime, persisted: np.mtime}
			if img, pinned := c.pinned[next]; pinned {
				c.entries[next].format = img.Format
				c.images[next] = &image{img: img, state: StateReady, bytes: np.size, total: np.size, since: c.now()}
			}
		} else {
			delete(c.images, next)
			if img, pinned := c.pinned[next]; pinned && !c.closed {
				c.startLocked(img, c.now())
			}
		}
		c.mu.Unlock()
	}
}

// verify hashes image d; a file whose bytes do not match (or that changed while hashed) is
// removed, one that matches gets a new stamp.
func (c *Cache) verify(d Digest) (bool, error) {
	path := c.path(d)
	ok, err := verifyFile(c.ctx, path, d)
	if err != nil {
		if c.ctx.Err() == nil {
			c.log.Warn("imagecache: re-verification failed", "sha256", d.String(), "err", err)
		}
		return false, err
	}
	if !ok {
		c.stats.corruptRemoved.Add(1)
		c.log.Warn("imagecache: removed a file whose bytes do not match its digest", "file", d.String())
		if err := removeQuiet(path); err != nil {
			c.log.Warn("imagecache: removal failed", "file", d.String(), "err", err)
		}
		removeQuiet(c.stampPath(d))
		return false, nil
	}
	c.stats.reverified.Add(1)
	if err := c.writeStamp(d); err != nil {
		c.log.Warn("imagecache: stamp not written; the image is hashed again on the next start", "sha256", d.String(), "err", err)
	}
	return true, nil
}

// WaitVerified waits until the images found by Open were hashed again (served or removed),
// or ctx ends, or the cache is shut down.
func (c *Cache) WaitVerified(ctx context.Context) error {
	select {
	case <-c.verified:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// verifyFile hashes a file and compares it with d; a file that changed while it was read
// does not match.
func verifyFile(ctx context.Context, path string, d Digest) (ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return false, err
	}
	h := sha256.New()
	buf := make([]byte, copyBufferSize)
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		n, rerr := f.Read(buf)
		h.Write(buf[:n])
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return false, rerr
		}
	}
	after, err := f.Stat()
	if err != nil {
		return false, err
	}
	if s1, ok1 := stampOf(before); ok1 {
		if s2, _ := stampOf(after); s1 != s2 {
			return false, nil
		}
	}
	var got Digest
	h.Sum(got[:0])
	return got == d, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (c *Cache) path(d Digest) string { return filepath.Join(c.dir, d.String()) }

// SetPinned names the images the host wants: each is pulled in the background unless it is
// cached, being verified or pulled, or failed and not yet due for its retry; none of them
// is evicted. Images no longer named lose their pin (and their status, unless cached or in
// flight), and their partial copies are removed. An invalid image is reported as failed,
// and the others still proceed.
func (c *Cache) SetPinned(images []Image) error {
	err := c.setPinned(images)
	c.Trim()
	return err
}

func (c *Cache) setPinned(images []Image) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrServerClosed
	}
	now := c.now()
	pinned := make(map[Digest]Image, len(images))
	var errs []error
	for _, img := range images {
		if err := img.Validate(); err != nil {
			errs = append(errs, err)
			if !img.SHA256.IsZero() {
				c.images[img.SHA256] = &image{img: img, state: StateFailed, err: err, since: now, total: -1}
				pinned[img.SHA256] = img
			}
			continue
		}
		pinned[img.SHA256] = img
	}
	c.pinned = pinned
	for _, img := range pinned {
		if img.Validate() != nil {
			continue
		}
		if e := c.entries[img.SHA256]; e != nil && img.Format != "" {
			e.format = img.Format
		}
		c.startLocked(img, now)
		if st := c.images[img.SHA256]; st != nil && st.state == StateWarming && st.seq != 0 {
			c.sched.setPriority(st.seq, c.priorityLocked(img.SHA256))
		}
	}
	for d, st := range c.images {
		if _, ok := pinned[d]; !ok && st.state != StateWarming {
			delete(c.images, d)
		}
	}
	for d := range c.partials {
		if _, ok := pinned[d]; ok {
			continue
		}
		if st := c.images[d]; st != nil && st.state == StateWarming {
			continue
		}
		if err := removeQuiet(c.partialPath(d)); err == nil {
			removeQuiet(c.metaPath(d))
			delete(c.partials, d)
		}
	}
	c.armRetryLocked(now)
	return errors.Join(errs...)
}

// startLocked starts a background pull of img when needed. c.mu is held.
func (c *Cache) startLocked(img Image, now time.Time) {
	d := img.SHA256
	if e, ok := c.entries[d]; ok {
		if st := c.images[d]; st != nil && st.state == StateReady {
			st.img = img
		} else {
			c.images[d] = &image{img: img, state: StateReady, bytes: e.size, total: e.size, since: now}
		}
		return
	}
	if p, ok := c.pending[d]; ok {
		if st := c.images[d]; st == nil || st.state != StateVerifying {
			c.images[d] = &image{img: img, state: StateVerifying, total: p.size, since: now}
		} else {
			st.img = img
		}
		return
	}
	failures := 0
	if st := c.images[d]; st != nil {
		if st.state == StateWarming {
			return
		}
		if st.state == StateFailed && !st.retryDue(now, c.clock.Monotonic()) && st.img.URL == img.URL {
			return
		}
		failures = st.failures
	}
	c.images[d] = &image{img: img, state: StateWarming, total: -1, since: now, failures: failures}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.sf.Do(d.String(), func() (any, error) { return nil, c.pull(img) })
	}()
}

// retryDue says whether a failed image's retry is due: its time has come by Config.Clock's
// wall clock (now), or its delay has passed on its monotonic reading (mono).
func (st *image) retryDue(now time.Time, mono time.Duration) bool {
	return !now.Before(st.nextRetry) || (!st.nextRetry.IsZero() && mono >= st.retryMono)
}

// retryDelay is the wait after the n-th consecutive failure of an image.
func (c *Cache) retryDelay(n int) time.Duration {
	d := c.cfg.RetryFailedAfter
	for i := 1; i < n && d < c.cfg.MaxRetryFailedAfter; i++ {
		d *= 2
	}
	return min(d, c.cfg.MaxRetryFailedAfter)
}

// armRetryLocked sets the retry timer for the earliest failed pinned image. c.mu is held.
func (c *Cache) armRetryLocked(now time.Time) {
	if c.closed {
		return
	}
	// The wait is the shorter of what the wall clock and the monotonic reading say: a
	// wall clock stepped forward retries early, as SetPinned would; one stepped back
	// delays nothing.
	wait, armed := time.Duration(0), false
	mono := c.clock.Monotonic()
	for d := range c.pinned {
		if st := c.images[d]; st != nil && st.state == StateFailed && !st.nextRetry.IsZero() {
			w := min(st.nextRetry.Sub(now), st.retryMono-mono)
			if !armed || w < wait {
				wait, armed = w, true
			}
		}
	}
	if !armed {
		if c.retryTimer != nil {
			c.retryTimer.Stop()
		}
		return
	}
	wait = max(wait, time.Millisecond)
	if c.retryTimer != nil {
		// A run of the old timer already under way finds nothing due, or pulls what is.
		c.retryTimer.Stop()
	}
	c.retryTimer = c.clock.AfterFunc(wait, c.retryDue)
}

// retryDue pulls again the failed pinned images whose retry is due.
func (c *Cache) retryDue() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	now, mono := c.now(), c.clock.Monotonic()
	for d, img := range c.pinned {
		if st := c.images[d]; st != nil && st.state == StateFailed && st.retryDue(now, mono) && img.Validate() == nil {
			c.startLocked(img, now)
		}
	}
	c.armRetryLocked(now)
}

// Pull pulls one image and waits until it is cached or failed, or ctx ends (the pull goes on
// in the background). Concurrent pulls of one digest share one transfer. The image is not
// pinned: name it in SetPinned to keep it from eviction. An image found by Open and not yet
// verified again is waited for, and pulled only when it did not match.
func (c *Cache) Pull(ctx context.Context, img Image) error {
	if err := img.Validate(); err != nil {
		return err
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return ErrServerClosed
		}
		if _, ok := c.entries[img.SHA256]; ok {
			c.mu.Unlock()
			return nil
		}
		if p := c.pending[img.SHA256]; p != nil {
			c.mu.Unlock()
			select {
			case <-p.done:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if st := c.images[img.SHA256]; st != nil && st.state == StateWarming {
			if img.Priority > st.img.Priority && st.seq != 0 {
				st.img.Priority = img.Priority
				c.sched.setPriority(st.seq, c.priorityLocked(img.SHA256))
			}
		}
		done := make(chan error, 1)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			_, err, _ := c.sf.Do(img.SHA256.String(), func() (any, error) { return nil, c.pull(img) })
			done <- err
		}()
		c.mu.Unlock()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pull runs one image's transfer; it is only ever called under the singleflight key.
func (c *Cache) pull(img Image) (err error) {
	d := img.SHA256
	c.mu.Lock()
	if _, ok := c.entries[d]; ok {
		c.mu.Unlock()
		return nil
	}
	st := c.images[d]
	if st == nil || st.state != StateWarming {
		failures := 0
		if st != nil {
			failures = st.failures
		}
		st = &image{img: img, state: StateWarming, total: -1, since: c.now(), failures: failures}
		c.images[d] = st
	}
	c.mu.Unlock()

	attempts := 0
	keep := false // the partial copy stays for a later resume
	defer func() {
		if err != nil && keep {
			c.Trim() // the partial copy counts against the budget
		}
	}()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		now := c.now()
		if err != nil {
			pe := &PullError{Digest: d, URL: img.URL, Attempts: attempts, Err: err}
			err = pe
			st.state, st.err, st.since = StateFailed, pe, now
			st.failures++
			st.nextRetry, st.retryMono = time.Time{}, 0
			if !errors.Is(err, ErrServerClosed) {
				delay := c.retryDelay(st.failures)
				st.nextRetry, st.retryMono = now.Add(delay), c.clock.Monotonic()+delay
			}
			if keep {
				if fi, serr := os.Stat(c.partialPath(d)); serr == nil {
					c.partials[d] = fi.Size()
				}
			} else {
				delete(c.partials, d)
			}
			c.stats.pullsFailed.Add(1)
			c.log.Warn("imagecache: pull failed", "sha256", d.String(), "url", img.URL, "attempts", attempts,
				"reason", ReasonOf(pe.Err), "err", pe.Err, "failures", st.failures, "next_retry", st.nextRetry)
			c.armRetryLocked(now)
			return
		}
		delete(c.partials, d)
		st.state, st.err, st.since, st.failures, st.nextRetry = StateReady, nil, now, 0, time.Time{}
	}()

	f, err := os.OpenFile(c.partialPath(d), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return writeError(err)
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		f.Close()
		if !keep {
			removeQuiet(f.Name())
			removeQuiet(c.metaPath(d))
		}
	}()
	t := newTransfer(c.client, img.URL, d, f, c.cfg.StallTimeout, c.cfg.MaxBytes)
	t.minRate, t.rateWindow, t.timeout = c.cfg.MinRate, c.cfg.RateWindow, c.cfg.PullTimeout
	t.check = c.policy.checkURL
	var seq uint64
	t.slots = func(ctx context.Context, again bool) (context.Context, func(), func() bool, error) {
		if !again || seq == 0 {
			seq = c.sched.nextSeq()
		}
		c.mu.Lock()
		st.seq = seq
		prio := c.priorityLocked(d)
		c.mu.Unlock()
		return c.sched.acquire(ctx, prio, seq)
	}
	meta, hasMeta := readMeta(c.metaPath(d))
	t.prepare = func(t *transfer) error {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.Size() == 0 {
			return nil
		}
		if !hasMeta || (meta.Total >= 0 && fi.Size() > meta.Total) {
			return t.reset()
		}
		if err := t.restore(c.ctx); err != nil {
			return err
		}
		if meta.URL == img.URL {
			t.val = meta.Validator
		}
		t.total = meta.Total
		c.stats.resumedPulls.Add(1)
		c.stats.resumedBytes.Add(t.n)
		c.log.Info("imagecache: resuming a partial pull", "sha256", d.String(), "bytes", t.n, "total", t.total)
		return nil
	}
	t.started = func(t *transfer, fresh bool) error {
		m := partialMeta{URL: img.URL, Validator: t.val, Total: t.total}
		if fresh || !hasMeta || m != meta {
			if err := writeMeta(c.metaPath(d), m); err != nil {
				return err
			}
			meta, hasMeta = m, true
		}
		return nil
	}
	var last int64 = -1
	t.progress = func(n, total int64) {
		if last < 0 || n < last {
			last = n // bytes already there (a resumed copy) or a copy started over
		}
		c.stats.bytesPulled.Add(n - last)
		last = n
		c.mu.Lock()
		st.bytes, st.total = n, total
		c.mu.Unlock()
	}
	c.stats.pullsStarted.Add(1)
	c.log.Info("imagecache: pulling", "sha256", d.String(), "url", img.URL)
	attempts, err = t.run(c.ctx, c.cfg.Retries, c.cfg.RetryDelay, c.cfg.MaxRetryDelay)
	c.stats.yields.Add(int64(t.yields))
	if err != nil {
		keep = (retryable(err) || errors.Is(err, ErrDeadline) || c.ctx.Err() != nil) && t.n > 0
		if c.ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrServerClosed, err)
		}
		if errors.Is(err, ErrSourceRefused) {
			c.stats.sourceRefused.Add(1)
		}
		return err
	}
	if err := f.Sync(); err != nil {
		return writeError(err)
	}
	if err := f.Close(); err != nil {
		return writeError(err)
	}
	if err := os.Rename(f.Name(), c.path(d)); err != nil {
		return err
	}
	committed = true
	removeQuiet(c.metaPath(d))
	if err := syncDir(c.dir); err != nil {
		// The name may not survive a crash, but the bytes under it are verified.
		c.log.Warn("imagecache: fsync of the cache directory failed", "err", err)
	}
	if err := c.writeStamp(d); err != nil {
		c.log.Warn("imagecache: stamp not written; the image is hashed again on the next start", "sha256", d.String(), "err", err)
	}
	now := c.now()
	c.mu.Lock()
	c.entries[d] = &entry{size: t.n, format: img.Format, lastUsed: now, persisted: now}
	c.mu.Unlock()
	c.stats.pullsOK.Add(1)
	c.log.Info("imagecache: cached", "sha256", d.String(), "bytes", t.n, "attempts", attempts)
	c.Trim()
	return nil
}

// Status returns the state of every pinned image and of any other image being pulled or
// failed, ordered by digest.
func (c *Cache) Status() []Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Status, 0, len(c.images))
	for d, st := range c.images {
		s := Status{Image: st.img, State: st.state, Bytes: st.bytes, Total: st.total, Err: st.err, Since: st.since,
			Priority: c.priorityLocked(d), Failures: st.failures}
		if st.state == StateFailed {
			if _, pinned := c.pinned[d]; pinned {
				s.NextRetry = st.nextRetry
			}
		}
		if e := c.entries[d]; e != nil {
			s.State, s.Bytes, s.Total, s.Err, s.Failures, s.NextRetry = StateReady, e.size, e.size, nil, 0, time.Time{}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Status) int { return compareDigest(a.Image.SHA256, b.Image.SHA256) })
	return out
}

// Lookup returns the inventory item of a cached image.
func (c *Cache) Lookup(d Digest) (Item, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[d]
	if e == nil {
		return Item{}, false
	}
	return c.itemLocked(d, e), true
}

// Inventory lists the cached (verified) images, ordered by digest.
func (c *Cache) Inventory() []Item {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Item, 0, len(c.entries))
	for d, e := range c.entries {
		out = append(out, c.itemLocked(d, e))
	}
	slices.SortFunc(out, func(a, b Item) int { return compareDigest(a.Digest, b.Digest) })
	return out
}

func (c *Cache) itemLocked(d Digest, e *entry) Item {
	_, pinned := c.pinned[d]
	format := e.format
	if p, ok := c.pinned[d]; ok && p.Format != "" {
		format = p.Format
	}
	return Item{Digest: d, Size: e.size, Format: format, LastUsed: e.lastUsed, Pinned: pinned, InUse: e.inUse}
}

func compareDigest(a, b Digest) int { return strings.Compare(string(a[:]), string(b[:])) }

// Trim runs one eviction pass: while the cache is over MaxBytes, partial copies of failed
// pulls (kept for a resume, and counted against the budget) are removed, then the least
// recently used image that is neither pinned nor being served. Images still being verified
// after Open count against the budget but are not evicted. It returns the images it
// evicted. Pulls trim after each image they cache and after each failure that leaves a
// partial copy; a host may also call it.
func (c *Cache) Trim() []Digest {
	if c.cfg.MaxBytes <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var total int64
	type cand struct {
		d Digest
		e *entry
	}
	var cands []cand
	for d, e := range c.entries {
		total += e.size
		if _, pinned := c.pinned[d]; !pinned && e.inUse == 0 {
			cands = append(cands, cand{d, e})
		}
	}
	for _, p := range c.pending {
		total += p.size
	}
	for _, size := range c.partials {
		total += size
	}
	if total <= c.cfg.MaxBytes {
		return nil
	}
	total = c.trimPartialsLocked(total)
	slices.SortFunc(cands, func(a, b cand) int {
		if x := a.e.lastUsed.Compare(b.e.lastUsed); x != 0 {
			return x
		}
		return compareDigest(a.d, b.d)
	})
	var evicted []Digest
	for _, k := range cands {
		if total <= c.cfg.MaxBytes {
			break
		}
		if err := os.Remove(c.path(k.d)); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.log.Warn("imagecache: eviction failed", "sha256", k.d.String(), "err", err)
			continue
		}
		c.forgetLocked(k.d)
		total -= k.e.size
		evicted = append(evicted, k.d)
		c.stats.evictions.Add(1)
		c.stats.evictedBytes.Add(k.e.size)
		c.log.Info("imagecache: evicted", "sha256", k.d.String(), "bytes", k.e.size)
	}
	if total > c.cfg.MaxBytes {
		c.log.Warn("imagecache: over budget with only pinned, in-use or unverified images left", "bytes", total, "budget", c.cfg.MaxBytes)
	}
	return evicted
}

// trimPartialsLocked removes partial copies, of images not being pulled, while total (the
// bytes counted against the budget) is over MaxBytes: those of unpinned images first, then
// the oldest failures, then the largest. A partial copy only saves a download, a cached image is verified, so
// partial copies go before any image. It returns the new total. c.mu is held.
func (c *Cache) trimPartialsLocked(total int64) int64 {
	type part struct {
		d      Digest
		size   int64
		pinned bool
		since  time.Time // when its pull failed; zero when found by Open
	}
	var parts []part
	for d, size := range c.partials {
		st := c.images[d]
		if st != nil && (st.state == StateWarming || st.state == StateVerifying) {
			continue // its pull holds the file
		}
		_, pinned := c.pinned[d]
		p := part{d: d, size: size, pinned: pinned}
		if st != nil {
			p.since = st.since
		}
		parts = append(parts, p)
	}
	slices.SortFunc(parts, func(a, b part) int {
		switch {
		case a.pinned != b.pinned:
			if a.pinned {
				return 1
			}
			return -1
		case !a.since.Equal(b.since):
			return a.since.Compare(b.since)
		case a.size != b.size:
			return cmp.Compare(b.size, a.size)
		}
		return compareDigest(a.d, b.d)
	})
	for _, p := range parts {
		if total <= c.cfg.MaxBytes {
			break
		}
		if err := removeQuiet(c.partialPath(p.d)); err != nil {
			c.log.Warn("imagecache: a partial pull could not be removed", "sha256", p.d.String(), "err", err)
			continue
		}
		removeQuiet(c.metaPath(p.d))
		delete(c.partials, p.d)
		total -= p.size
		c.stats.partialsTrimmed.Add(1)
		c.stats.partialBytesTrimmed.Add(p.size)
		c.log.Info("imagecache: removed a partial pull over the budget", "sha256", p.d.String(), "bytes", p.size)
	}
	return total
}

// forgetLocked drops a cached image that is gone from disk (and its stamp); a pinned one is
// pulled again. c.mu is held.
func (c *Cache) forgetLocked(d Digest) {
	delete(c.entries, d)
	delete(c.images, d)
	removeQuiet(c.stampPath(d))
	if img, ok := c.pinned[d]; ok && !c.closed {
		c.startLocked(img, c.now())
	}
}

// Shutdown stops the cache: running pulls and the re-verification are cancelled (partial
// copies stay, to be resumed by the next Open) and Shutdown waits for them, or for ctx.
// Cached files stay; ServeHTTP keeps serving them.
func (c *Cache) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	if c.retryTimer != nil {
		c.retryTimer.Stop()
	}
	c.mu.Unlock()
	c.cancel()
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.closeOnce.Do(func() {
		c.client.CloseIdleConnections()
		c.lockFile.Close()
	})
	return nil
}

// Close is Shutdown without a deadline: pulls are cancelled, and Close returns once their
// goroutines ended (promptly: every step of a pull watches the cancellation).
func (c *Cache) Close() error { return c.Shutdown(context.Background()) }
