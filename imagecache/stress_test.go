package imagecache_test

import (
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
)

// Serving, pulling, re-pinning and trimming at once under a budget that holds about half
// the images: every image served is whole and matches its digest, and the cache ends within
// its budget (nothing pinned).
func TestConcurrentServeAndEvict(t *testing.T) {
	const n = 8
	cfg := fastConfig(t)
	cfg.MaxBytes = 4 * 50000
	cfg.ConcurrentPulls = 3
	cfg.Fence = imagecache.FenceFunc(func() (uint64, bool) { return 1, true })
	c := open(t, cfg)
	var imgs []imagecache.Image
	for i := range n {
		body := randomBytes(uint64(600+i), 50000)
		src := newSource(t, body, "good", false)
		imgs = append(imgs, imagecache.Image{URL: src.URL(), SHA256: sha256.Sum256(body)})
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	g, err := c.BootGrant(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var wg, pulls sync.WaitGroup
	var mu sync.Mutex
	served, bad := 0, 0
	pulling := make(chan struct{})
	// The servers run at least 60 requests each and on until the pulls are done (so some
	// requests meet cached images however slowly pulls run on a loaded machine), bounded.
	busy := func(i int) bool {
		select {
		case <-pulling:
			return i < 60
		default:
			return i < 5000
		}
	}
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; busy(i); i++ {
				img := imgs[rng.IntN(n)]
				resp, err := srv.Client().Get(srv.URL + g.Path(img.SHA256))
				if err != nil {
					t.Error(err)
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				switch {
				case resp.StatusCode == http.StatusNotFound:
				case resp.StatusCode == http.StatusOK && err == nil && sha256.Sum256(body) == img.SHA256:
					served++
				default:
					bad++
				}
				mu.Unlock()
			}
		})
	}
	for w := range 2 {
		pulls.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 8))
			for range 40 {
				if rng.IntN(4) == 0 {
					k := rng.IntN(3)
					c.SetPinned(imgs[k : k+2])
					continue
				}
				if err := c.Pull(context.Background(), imgs[rng.IntN(n)]); err != nil {
					t.Error(err)
				}
			}
		})
	}
	pulls.Wait()
	close(pulling)
	wg.Wait()
	if bad != 0 {
		t.Errorf("%d responses were neither 404 nor the whole image", bad)
	}
	if served == 0 {
		t.Error("nothing was served")
	}
	c.SetPinned(nil)
	var total int64
	for _, it := range c.Inventory() {
		total += it.Size
	}
	if total > cfg.MaxBytes {
		t.Errorf("cache holds %d bytes after a trim, budget %d", total, cfg.MaxBytes)
	}
	if got, want := len(visibleFiles(t, cfg.Dir)), len(c.Inventory()); got != want {
		t.Errorf("%d files on disk, %d in the inventory", got, want)
	}
	checkVisibleVerified(t, cfg.Dir)
	t.Logf("served %d whole images", served)
}
