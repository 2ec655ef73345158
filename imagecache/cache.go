package imagecache

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"
)

// Defaults used when the matching Config field is zero.
const (
	DefaultConcurrentPulls  = 2
	DefaultStallTimeout     = 30 * time.Second
	DefaultRetries          = 4
	DefaultRetryDelay       = time.Second
	DefaultMaxRetryDelay    = time.Minute
	DefaultRetryFailedAfter = 15 * time.Minute
	DefaultBootGrantTTL     = 6 * time.Hour
	DefaultFirmwareGrantTTL = 2 * time.Hour
	DefaultMaxGrants        = 1 << 16
)

// tempPrefix starts the name of every file a pull writes before its digest is checked. The
// handler only ever opens names of 64 hex digits, so these are never served, and Open removes
// them.
const tempPrefix = ".pull-"

const lockName = ".lock"

// Config configures a Cache. Only Dir is required.
type Config struct {
	// Dir holds the cached images, each named by its digest's 64 hex digits. Created (0750)
	// when missing. One process at a time: Open locks it.
	Dir string

	// MaxBytes is the byte budget of the cached images; each trim pass evicts
	// least-recently-used images that are neither pinned nor being served until the cache
	// fits. Zero: no budget. An image larger than MaxBytes is refused (ErrTooLarge).
	MaxBytes int64

	// Client pulls the images. Nil: a client of its own, with the proxy from the environment.
	Client *http.Client

	// ConcurrentPulls bounds the pulls running at once. Zero: DefaultConcurrentPulls.
	ConcurrentPulls int

	// StallTimeout ends an attempt when no byte (or no response header) came for this long.
	// Zero: DefaultStallTimeout.
	StallTimeout time.Duration

	// Retries is how many times a failed attempt is retried (network errors, stalls, short
	// bodies, 5xx, 408, 429), resuming with a Range request where the source allows it.
	// A wrong digest, 4xx, a full disk or a too large image are not retried.
	// Zero: DefaultRetries; negative: none.
	Retries int

	// RetryDelay is the wait before the first retry, doubled on each next one up to
	// MaxRetryDelay. Zero: DefaultRetryDelay and DefaultMaxRetryDelay.
	RetryDelay, MaxRetryDelay time.Duration

	// RetryFailedAfter is how long a failed pinned image stays failed before SetPinned pulls
	// it again. Zero: DefaultRetryFailedAfter.
	RetryFailedAfter time.Duration

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

	// Now is the clock for grants and last-used times. Nil: time.Now.
	Now func() time.Time

	// Logger receives pull, eviction and refusal events. Nil: discard.
	Logger *slog.Logger
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
		c.BootGrantTTL < 0, c.FirmwareGrantTTL < 0:
		return errors.New("imagecache: a Config duration is negative")
	case c.MaxGrants < 0:
		return errors.New("imagecache: Config.MaxGrants is negative")
	}
	return nil
}

// State is where an image stands.
type State int

// States of an image.
const (
	StateWarming State = iota + 1 // queued or being pulled
	StateReady                    // verified and cached
	StateFailed                   // the last pull failed; Status.Err says why
)

func (s State) String() string {
	switch s {
	case StateWarming:
		return "warming"
	case StateReady:
		return "ready"
	case StateFailed:
		return "failed"
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
	img   Image
	state State
	bytes int64
	total int64
	err   error
	since time.Time
}

// Cache is a content-addressed image cache: verified pulls into a directory, LRU trimming
// under a byte budget with pins, and grant-gated serving (ServeHTTP).
type Cache struct {
	cfg      Config
	dir      string
	log      *slog.Logger
	now      func() time.Time
	rand     io.Reader
	client   *http.Client
	lockFile *os.File

	ctx    context.Context // cancelled by Shutdown and Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    *semaphore.Weighted
	sf     singleflight.Group

	closeOnce sync.Once

	mu      sync.Mutex
	closed  bool
	entries map[Digest]*entry
	images  map[Digest]*image
	pinned  map[Digest]Image

	grants grantTable
	stats  counters
}

// Open opens (or creates) the cache directory and scans it: leftover temp files of
// interrupted pulls are removed, and every image file is hashed again; a file whose bytes do
// not match its name is removed. Only verified files are served.
func Open(ctx context.Context, cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{
		cfg:     cfg,
		dir:     filepath.Clean(cfg.Dir),
		log:     cfg.Logger,
		now:     cfg.Now,
		rand:    cfg.Rand,
		client:  cfg.Client,
		entries: map[Digest]*entry{},
		images:  map[Digest]*image{},
		pinned:  map[Digest]Image{},
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.rand == nil {
		c.rand = rand.Reader
	}
	if c.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		c.client = &http.Client{Transport: tr}
	}
	c.cfg.ConcurrentPulls = orDefault(cfg.ConcurrentPulls, DefaultConcurrentPulls)
	c.cfg.StallTimeout = orDefault(cfg.StallTimeout, DefaultStallTimeout)
	c.cfg.RetryDelay = orDefault(cfg.RetryDelay, DefaultRetryDelay)
	c.cfg.MaxRetryDelay = max(orDefault(cfg.MaxRetryDelay, DefaultMaxRetryDelay), c.cfg.RetryDelay)
	c.cfg.RetryFailedAfter = orDefault(cfg.RetryFailedAfter, DefaultRetryFailedAfter)
	c.cfg.BootGrantTTL = orDefault(cfg.BootGrantTTL, DefaultBootGrantTTL)
	c.cfg.FirmwareGrantTTL = orDefault(cfg.FirmwareGrantTTL, DefaultFirmwareGrantTTL)
	c.cfg.MaxGrants = orDefault(cfg.MaxGrants, DefaultMaxGrants)
	switch {
	case cfg.Retries == 0:
		c.cfg.Retries = DefaultRetries
	case cfg.Retries < 0:
		c.cfg.Retries = 0
	}
	c.sem = semaphore.NewWeighted(int64(c.cfg.ConcurrentPulls))
	c.grants.init()

	if err := os.MkdirAll(c.dir, 0o750); err != nil {
		return nil, fmt.Errorf("imagecache: open: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(c.dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("imagecache: open: %w", err)
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrLocked, c.dir, err)
	}
	c.lockFile = lf
	if err := c.scan(ctx); err != nil {
		lf.Close()
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// scan removes temp files and re-verifies every image file, a few at a time.
func (c *Cache) scan(ctx context.Context) error {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("imagecache: scan: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.ConcurrentPulls)
	var mu sync.Mutex
	for _, de := range des {
		name := de.Name()
		switch {
		case strings.HasPrefix(name, tempPrefix):
			if err := os.Remove(filepath.Join(c.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("imagecache: scan: %w", err)
			}
			c.stats.tempRemoved.Add(1)
			c.log.Info("imagecache: removed an interrupted pull", "file", name)
			continue
		case name == lockName:
			continue
		}
		var d Digest
		if !parseLowerHex(d[:], name) || !de.Type().IsRegular() {
			c.log.Warn("imagecache: ignoring a file that is not an image", "file", name)
			continue
		}
		g.Go(func() error {
			path := filepath.Join(c.dir, name)
			size, mtime, ok, err := verifyFile(gctx, path, d)
			if err != nil {
				return fmt.Errorf("imagecache: scan %s: %w", name, err)
			}
			if !ok {
				c.stats.corruptRemoved.Add(1)
				c.log.Warn("imagecache: removed a file whose bytes do not match its digest", "file", name)
				if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("imagecache: scan: %w", err)
				}
				return nil
			}
			mu.Lock()
			c.entries[d] = &entry{size: size, lastUsed: mtime, persisted: mtime}
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return syncDir(c.dir)
}

// verifyFile hashes a file and compares it with d.
func verifyFile(ctx context.Context, path string, d Digest) (size int64, mtime time.Time, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, time.Time{}, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, time.Time{}, false, err
	}
	h := sha256.New()
	buf := make([]byte, copyBufferSize)
	for {
		if err := ctx.Err(); err != nil {
			return 0, time.Time{}, false, err
		}
		n, rerr := f.Read(buf)
		h.Write(buf[:n])
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, time.Time{}, false, rerr
		}
	}
	var got Digest
	h.Sum(got[:0])
	return fi.Size(), fi.ModTime(), got == d, nil
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
// cached, being pulled, or failed less than RetryFailedAfter ago; none of them is evicted.
// Images no longer named lose their pin (and their status, unless cached or in flight).
// An invalid image is reported as failed, and the others still proceed.
func (c *Cache) SetPinned(images []Image) error {
	err := c.setPinned(images)
	c.Trim()
	return err
}

func (c *Cache) setPinned(images []Image) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
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
		if e := c.entries[img.SHA256]; e != nil && img.Format != "" {
			e.format = img.Format
		}
		c.startLocked(img, now)
	}
	for d, st := range c.images {
		if _, ok := pinned[d]; !ok && st.state != StateWarming {
			delete(c.images, d)
		}
	}
	c.pinned = pinned
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
	if st := c.images[d]; st != nil {
		if st.state == StateWarming {
			return
		}
		if st.state == StateFailed && now.Sub(st.since) < c.cfg.RetryFailedAfter && st.img.URL == img.URL {
			return
		}
	}
	c.images[d] = &image{img: img, state: StateWarming, total: -1, since: now}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.sf.Do(d.String(), func() (any, error) { return nil, c.pull(img) })
	}()
}

// Pull pulls one image and waits until it is cached or failed, or ctx ends (the pull goes on
// in the background). Concurrent pulls of one digest share one transfer. The image is not
// pinned: name it in SetPinned to keep it from eviction.
func (c *Cache) Pull(ctx context.Context, img Image) error {
	if err := img.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if _, ok := c.entries[img.SHA256]; ok {
		c.mu.Unlock()
		return nil
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
		st = &image{img: img, state: StateWarming, total: -1, since: c.now()}
		c.images[d] = st
	}
	c.mu.Unlock()

	attempts := 0
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		now := c.now()
		if err != nil {
			pe := &PullError{Digest: d, URL: img.URL, Attempts: attempts, Err: err}
			err = pe
			st.state, st.err, st.since = StateFailed, pe, now
			c.stats.pullsFailed.Add(1)
			c.log.Warn("imagecache: pull failed", "sha256", d.String(), "url", img.URL, "attempts", attempts, "err", pe.Err)
			return
		}
		st.state, st.err, st.since = StateReady, nil, now
	}()

	if err := c.sem.Acquire(c.ctx, 1); err != nil {
		return ErrClosed
	}
	defer c.sem.Release(1)
	c.stats.pullsStarted.Add(1)
	c.log.Info("imagecache: pulling", "sha256", d.String(), "url", img.URL)

	f, err := os.CreateTemp(c.dir, tempPrefix+d.String()+"-*")
	if err != nil {
		return writeError(err)
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	t := newTransfer(c.client, img.URL, d, f, c.cfg.StallTimeout, c.cfg.MaxBytes)
	var last int64
	t.progress = func(n, total int64) {
		c.stats.bytesPulled.Add(n - last)
		last = n
		c.mu.Lock()
		st.bytes, st.total = n, total
		c.mu.Unlock()
	}
	attempts, err = t.run(c.ctx, c.cfg.Retries, c.cfg.RetryDelay, c.cfg.MaxRetryDelay)
	if err != nil {
		if c.ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrClosed, err)
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
	if err := syncDir(c.dir); err != nil {
		// The name may not survive a crash, but the bytes under it are verified.
		c.log.Warn("imagecache: fsync of the cache directory failed", "err", err)
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
		s := Status{Image: st.img, State: st.state, Bytes: st.bytes, Total: st.total, Err: st.err, Since: st.since}
		if e := c.entries[d]; e != nil {
			s.State, s.Bytes, s.Total, s.Err = StateReady, e.size, e.size, nil
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

// Inventory lists the cached images, ordered by digest.
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

// Trim runs one eviction pass: while the cache is over MaxBytes, the least recently used
// image that is neither pinned nor being served is removed. It returns what it evicted.
// Pulls trim after each image they cache; a host may also call it.
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
	if total <= c.cfg.MaxBytes {
		return nil
	}
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
		c.log.Warn("imagecache: over budget with only pinned or in-use images left", "bytes", total, "budget", c.cfg.MaxBytes)
	}
	return evicted
}

// forgetLocked drops a cached image that is gone from disk; a pinned one is pulled again.
// c.mu is held.
func (c *Cache) forgetLocked(d Digest) {
	delete(c.entries, d)
	delete(c.images, d)
	if img, ok := c.pinned[d]; ok && !c.closed {
		c.startLocked(img, c.now())
	}
}

// Shutdown stops the cache: running pulls are cancelled (their temp files removed) and
// Shutdown waits for them, or for ctx. Cached files stay; ServeHTTP keeps serving them.
func (c *Cache) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
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
