package imagecache_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
)

// dirBytes is what the cache directory's images and partial copies hold (not the small
// metadata files beside them).
func dirBytes(t *testing.T, dir string) (total int64, partials int) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := e.Name()
		isPartial := strings.HasPrefix(name, ".pull-") && !strings.HasSuffix(name, ".meta")
		if !isPartial && len(name) != 64 {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
		if isPartial {
			partials++
		}
	}
	return total, partials
}

// TestShortBodyPartialsHoldBudget performs the half-body fault: an origin that sends half of
// its Content-Length and closes. Each failed pull keeps its partial copy for a resume;
// twelve of them would hold three times MaxBytes. Partial copies count against the budget
// and go first, so the directory stays within it, and the newest failure's copy is kept.
func TestShortBodyPartialsHoldBudget(t *testing.T) {
	const size, budget, images = 8000, 10000, 12
	bodies := map[string][]byte{}
	for i := range images {
		bodies[fmt.Sprintf("/img%d", i)] = randomBytes(uint64(700+i), size)
	}
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		n, _ := w.Write(b[:len(b)/2]) // then the handler returns: the body is cut short
		served.Add(int64(n))
	}))
	t.Cleanup(srv.Close)
	cfg := fastConfig(t)
	cfg.Retries = -1
	cfg.MaxBytes = budget
	c := open(t, cfg)
	var last imagecache.Digest
	for i := range images {
		path := fmt.Sprintf("/img%d", i)
		last = sha256.Sum256(bodies[path])
		err := c.Pull(context.Background(), imagecache.Image{URL: srv.URL + path, SHA256: last})
		if err == nil {
			t.Fatalf("%s: a pull of half the body succeeded", path)
		}
		if total, _ := dirBytes(t, cfg.Dir); total > budget {
			t.Fatalf("after %d short pulls the directory holds %d bytes, budget %d", i+1, total, budget)
		}
	}
	if served.Load() < images*size/2 {
		t.Fatalf("the origin sent %d bytes: the pulls did not run", served.Load())
	}
	total, partials := dirBytes(t, cfg.Dir)
	if partials == 0 || total == 0 {
		t.Errorf("no partial copy kept (%d bytes): a resume has nothing to start from", total)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, ".pull-"+last.String())); err != nil {
		t.Errorf("the newest failure's partial copy is gone: %v", err)
	}
	s := c.Stats()
	if want := uint64(images - partials); s.PartialsTrimmed != want || s.PartialBytesTrimmed != want*size/2 {
		t.Errorf("PartialsTrimmed %d (%d bytes), want %d (%d bytes)", s.PartialsTrimmed, s.PartialBytesTrimmed, want, want*size/2)
	}
}

// TestRetryAfterClockStepBack performs the clock fault: the Clock's wall time steps back an
// hour after a pinned image failed. Its retry still comes once RetryFailedAfter has passed
// (on the monotonic reading), not an hour later.
func TestRetryAfterClockStepBack(t *testing.T) {
	o := newOrigin(t, []byte("z"))
	o.set(func(o *origin) { o.code = 503 })
	clk := newClock()
	cfg := fastConfig(t)
	cfg.Clock = clk
	cfg.Retries = -1
	cfg.RetryFailedAfter = time.Minute
	c := open(t, cfg)
	img := imagecache.Image{URL: o.URL(), SHA256: sha256.Sum256([]byte("z"))}
	c.SetPinned([]imagecache.Image{img})
	waitFor(t, "the first failure", func() bool { return status(c, img.SHA256).State == imagecache.StateFailed })
	clk.Set(clk.Now().Add(-time.Hour))
	clk.Advance(time.Minute - time.Second)
	if st := status(c, img.SHA256); st.State != imagecache.StateFailed {
		t.Fatalf("a second before the retry: state %v, want failed", st.State)
	}
	clk.Advance(time.Second)
	if st := status(c, img.SHA256); st.State == imagecache.StateFailed && st.Failures == 1 {
		t.Fatalf("RetryFailedAfter after the step back: still failed once, not retried")
	}
	waitFor(t, "the retry after the clock stepped back", func() bool { return len(o.Requests()) >= 2 })
}
