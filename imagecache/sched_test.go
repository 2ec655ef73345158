package imagecache_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/google/go-cmp/cmp"
)

// trickleConfig has two pull slots and a minimum rate of 64 KiB/s over 300 ms windows; a
// source sending a byte a second is far below it. Retries are plenty, so a trickling pull
// stays warming (and keeps coming back for a slot) for the whole test.
func trickleConfig(t *testing.T) imagecache.Config {
	cfg := fastConfig(t)
	cfg.ConcurrentPulls = 2
	cfg.MinRate = 64 << 10
	cfg.RateWindow = 300 * time.Millisecond
	cfg.StallTimeout = 10 * time.Second // a byte a second never stalls
	cfg.Retries = 100000
	return cfg
}

func status(c *imagecache.Cache, d imagecache.Digest) imagecache.Status {
	for _, s := range c.Status() {
		if s.Image.SHA256 == d {
			return s
		}
	}
	return imagecache.Status{}
}

// Two trickling sources (a byte a second, under the stall timeout) hold both pull slots; a
// good image named after them still gets a slot and is cached while they are still
// warming: each trickling attempt ends within a rate window and goes to the back of the
// queue.
func TestTrickleCannotBlockGoodImage(t *testing.T) {
	cfg := trickleConfig(t)
	c := open(t, cfg)
	var imgs []imagecache.Image
	var origins []*origin
	for i := range 2 {
		body := randomBytes(uint64(900+i), 4096)
		o := newOrigin(t, body)
		o.set(func(o *origin) { o.trickle = true })
		origins = append(origins, o)
		imgs = append(imgs, imagecache.Image{URL: o.URL(), SHA256: sha256.Sum256(body)})
	}
	c.SetPinned(imgs)
	waitFor(t, "both trickling pulls holding a slot", func() bool {
		return len(origins[0].Requests()) > 0 && len(origins[1].Requests()) > 0
	})
	goodBody := randomBytes(902, 1<<20)
	good := newOrigin(t, goodBody)
	goodImg := imagecache.Image{URL: good.URL(), SHA256: sha256.Sum256(goodBody)}
	c.SetPinned(append(imgs, goodImg))
	waitFor(t, "the good image cached", func() bool { return status(c, goodImg.SHA256).State == imagecache.StateReady })
	for i, img := range imgs {
		if st := status(c, img.SHA256); st.State != imagecache.StateWarming {
			t.Errorf("trickling image %d: %v, want still warming", i, st.State)
		}
	}
	if n := len(good.Requests()); n != 1 {
		t.Errorf("good source asked %d times, want 1", n)
	}
}

// With one slot, a running pull of lower priority gives its slot to the site's kernel at
// once, though that pull's source holds its response (for up to the one-minute stall
// timeout): the kernel is pulled first, and the other pull then resumes by Range where it
// was.
func TestBootImagePreemptsLowerPriority(t *testing.T) {
	restBody := randomBytes(910, 2<<20)
	half := int64(len(restBody) / 2)
	rest := newOrigin(t, restBody)
	rest.set(func(o *origin) { o.holdAt, o.holdOnce = half, true })
	bootBody := randomBytes(911, 256<<10)
	boot := newOrigin(t, bootBody)
	restImg := imagecache.Image{URL: rest.URL(), SHA256: sha256.Sum256(restBody)}
	bootImg := imagecache.Image{URL: boot.URL(), SHA256: sha256.Sum256(bootBody)}

	cfg := fastConfig(t)
	cfg.ConcurrentPulls = 1
	cfg.StallTimeout = time.Minute // the held response would hold the slot for a minute
	cfg.BootImages = []imagecache.Digest{bootImg.SHA256}
	c := open(t, cfg)
	restDone := make(chan error, 1)
	go func() { restDone <- c.Pull(context.Background(), restImg) }()
	waitFor(t, "the other pull at half", func() bool { return status(c, restImg.SHA256).Bytes == half })

	c.SetPinned([]imagecache.Image{bootImg})
	waitFor(t, "the kernel cached", func() bool { return status(c, bootImg.SHA256).State == imagecache.StateReady })
	if st := status(c, bootImg.SHA256); st.Priority != imagecache.PriorityBoot {
		t.Errorf("kernel priority %v, want boot", st.Priority)
	}
	if err := <-restDone; err != nil {
		t.Fatalf("other pull: %v", err)
	}
	want := []originReq{
		{Status: 200},
		{Range: "bytes=" + strconv.FormatInt(half, 10) + "-", IfRange: `"v1"`, Status: 206},
	}
	if diff := cmp.Diff(want, rest.Requests()); diff != "" {
		t.Errorf("requests of the preempted pull (-want +got):\n%s", diff)
	}
	if rt, bt := rest.Times(), boot.Times(); len(rt) == 2 && len(bt) == 1 && !bt[0].Before(rt[1]) {
		t.Errorf("the preempted pull resumed at %v, before the kernel was asked for at %v", rt[1], bt[0])
	}
	if s := c.Stats(); s.Preemptions != 1 {
		t.Errorf("Preemptions %d, want 1", s.Preemptions)
	}
	checkVisibleVerified(t, cfg.Dir)
}

// With one slot, a pull above the minimum rate but long (8 MiB at 4 MiB/s) gives its slot
// to a pull of the same priority after a rate window, and resumes by Range after it: the
// second image is pulled in the middle of the long one, not after it.
func TestEqualPrioritiesShareSlots(t *testing.T) {
	longBody := randomBytes(960, 8<<20)
	long := newOrigin(t, longBody)
	long.set(func(o *origin) { o.throttle = 4 << 20 })
	shortBody := randomBytes(961, 64<<10)
	short := newOrigin(t, shortBody)
	longImg := imagecache.Image{URL: long.URL(), SHA256: sha256.Sum256(longBody)}
	shortImg := imagecache.Image{URL: short.URL(), SHA256: sha256.Sum256(shortBody)}
	cfg := fastConfig(t)
	cfg.ConcurrentPulls = 1
	cfg.MinRate = 64 << 10
	cfg.RateWindow = 200 * time.Millisecond
	c := open(t, cfg)
	c.SetPinned([]imagecache.Image{longImg})
	waitFor(t, "the long pull under way", func() bool { return status(c, longImg.SHA256).Bytes > 0 })
	c.SetPinned([]imagecache.Image{longImg, shortImg})
	waitFor(t, "the short image cached", func() bool { return status(c, shortImg.SHA256).State == imagecache.StateReady })
	if err := c.Pull(context.Background(), longImg); err != nil {
		t.Fatal(err)
	}
	// The short image was asked for before the long pull resumed: the long pull had given
	// its slot up in the middle.
	if st, lt := short.Times(), long.Times(); len(st) != 1 || len(lt) < 2 || !st[0].Before(lt[1]) {
		t.Errorf("short image asked for at %v, long one at %v: want the short one before the long one's resume", st, lt)
	}
	reqs := long.Requests()
	if len(reqs) < 2 || reqs[1].Status != 206 || reqs[1].IfRange != `"v1"` {
		t.Errorf("long pull's requests %+v, want a resume (206 under If-Range) after the first", reqs)
	}
	if s := c.Stats(); s.Yields < 1 || s.Preemptions != 0 {
		t.Errorf("Yields %d Preemptions %d, want at least 1 and 0", s.Yields, s.Preemptions)
	}
	checkVisibleVerified(t, cfg.Dir)
}

// A pull's deadline is PullTimeout plus its size at MinRate: a source that keeps the pull
// going below the rate, retried without end, fails with ErrDeadline, not after its retries.
func TestPullDeadline(t *testing.T) {
	body := randomBytes(920, 64)
	o := newOrigin(t, body)
	o.set(func(o *origin) { o.trickle = true })
	cfg := fastConfig(t)
	cfg.MinRate = 1 << 10
	cfg.RateWindow = 50 * time.Millisecond
	cfg.PullTimeout = 300 * time.Millisecond
	cfg.StallTimeout = 10 * time.Second
	cfg.Retries = 100000
	c := open(t, cfg)
	start := time.Now()
	err := c.Pull(context.Background(), imagecache.Image{URL: o.URL(), SHA256: sha256.Sum256(body)})
	took := time.Since(start)
	if !errors.Is(err, imagecache.ErrDeadline) || imagecache.ReasonOf(err) != "deadline" {
		t.Fatalf("Pull = %v (reason %q), want ErrDeadline", err, imagecache.ReasonOf(err))
	}
	// The deadline: 300 ms + 64 bytes at 1 KiB/s = 362.5 ms of attempts and back-offs.
	if took < 362*time.Millisecond {
		t.Errorf("failed after %v, before its deadline", took)
	}
	var pe *imagecache.PullError
	if !errors.As(err, &pe) || pe.Attempts >= cfg.Retries {
		t.Errorf("PullError %+v, want fewer attempts than the retries allowed", pe)
	}
}

// A failed pinned image is pulled again after RetryFailedAfter, doubling with each failure
// up to MaxRetryFailedAfter; Status says why it failed, how often, and when it is next tried.
func TestFailedPinnedBackoff(t *testing.T) {
	o := newOrigin(t, []byte("x"))
	o.set(func(o *origin) { o.code = 404 })
	clk := newClock()
	cfg := fastConfig(t)
	cfg.Clock = clk
	cfg.RetryFailedAfter = time.Minute
	cfg.MaxRetryFailedAfter = 4 * time.Minute
	c := open(t, cfg)
	img := imagecache.Image{URL: o.URL(), SHA256: sha256.Sum256([]byte("x"))}
	c.SetPinned([]imagecache.Image{img})
	for i, delay := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 4 * time.Minute} {
		waitFor(t, "the pull to fail", func() bool {
			st := status(c, img.SHA256)
			return st.State == imagecache.StateFailed && st.Failures == i+1
		})
		st := status(c, img.SHA256)
		if got := st.NextRetry.Sub(st.Since); got != delay {
			t.Errorf("failure %d: next retry %v after the failure, want %v", i+1, got, delay)
		}
		if imagecache.ReasonOf(st.Err) != "http-404" {
			t.Errorf("failure %d: reason %q", i+1, imagecache.ReasonOf(st.Err))
		}
		clk.Advance(delay - time.Second)
		c.SetPinned([]imagecache.Image{img})
		if n := len(o.Requests()); n != i+1 {
			t.Fatalf("failure %d: %d requests a second before the retry, want %d", i+1, n, i+1)
		}
		clk.Advance(time.Second)
		c.SetPinned([]imagecache.Image{img})
		waitFor(t, "the retry", func() bool { return len(o.Requests()) == i+2 })
	}
}

// The cache retries a failed pinned image by itself, with no further SetPinned, when its
// Clock reaches the retry, and the waits grow: 1 minute, then 2, then 2 (the cap).
func TestFailedPinnedRetriedUnasked(t *testing.T) {
	o := newOrigin(t, []byte("y"))
	o.set(func(o *origin) { o.code = 503 })
	clk := newClock()
	cfg := fastConfig(t)
	cfg.Clock = clk
	cfg.Retries = -1
	cfg.RetryFailedAfter = time.Minute
	cfg.MaxRetryFailedAfter = 2 * time.Minute
	c := open(t, cfg)
	img := imagecache.Image{URL: o.URL(), SHA256: sha256.Sum256([]byte("y"))}
	c.SetPinned([]imagecache.Image{img})
	for i, delay := range []time.Duration{time.Minute, 2 * time.Minute, 2 * time.Minute} {
		var st imagecache.Status
		waitFor(t, "the pull to fail", func() bool {
			st = status(c, img.SHA256)
			return st.State == imagecache.StateFailed && st.Failures == i+1
		})
		if imagecache.ReasonOf(st.Err) != "http-503" || st.NextRetry.Sub(st.Since) != delay {
			t.Errorf("failure %d: Status %+v, want http-503 and the next retry %v later", i+1, st, delay)
		}
		clk.Advance(delay - time.Second)
		if n := len(o.Requests()); n != i+1 || status(c, img.SHA256).State != imagecache.StateFailed {
			t.Fatalf("failure %d: %d requests a second before the retry, want %d and no pull", i+1, n, i+1)
		}
		clk.Advance(time.Second)
		waitFor(t, "the retry", func() bool { return len(o.Requests()) == i+2 })
	}
}
