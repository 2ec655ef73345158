package imagecachetest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/imagecache/imagecachetest"
	"go.uber.org/goleak"
)

// TestMain checks that Close leaves no goroutine of the origin (nor of the caches) behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOriginServesByDigest(t *testing.T) {
	o := imagecachetest.NewOrigin()
	defer o.Close()
	body := []byte(strings.Repeat("kernel", 5000))
	img := o.Add(body, "raw")
	if err := img.Validate(); err != nil {
		t.Fatalf("Add returned an image that does not validate: %v", err)
	}

	get := func(url, rng string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, got := get(img.URL, ""); code != 200 || got != string(body) {
		t.Fatalf("GET image: %d, %d bytes", code, len(got))
	}
	if code, got := get(img.URL, "bytes=6-11"); code != 206 || got != "kernel" {
		t.Fatalf("GET range: %d %q, want 206 \"kernel\"", code, got)
	}
	if code, _ := get(o.URL+"/sha256/"+strings.Repeat("0", 64), ""); code != 404 {
		t.Errorf("unknown digest: %d, want 404", code)
	}
	if code, _ := get(o.URL+"/other", ""); code != 404 {
		t.Errorf("other path: %d, want 404", code)
	}
	o.Remove(img.SHA256)
	if code, _ := get(img.URL, ""); code != 404 {
		t.Errorf("removed image: %d, want 404", code)
	}
	if s := o.Stats(); s.Requests != 5 || s.NotFound != 3 || s.Bytes != uint64(len(body)+6) {
		t.Errorf("Stats = %+v, want 5 requests, 3 not found, %d bytes", s, len(body)+6)
	}
}

// TestCachePullsFromOrigin: a cache opened with Loopback pulls and verifies an image from
// the origin; one the origin no longer has fails with http-404.
func TestCachePullsFromOrigin(t *testing.T) {
	o := imagecachetest.NewOrigin()
	defer o.Close()
	good := o.Add([]byte("a disk image"), "raw")
	gone := o.Add([]byte("another"), "raw")
	o.Remove(gone.SHA256)

	c, err := imagecache.Open(context.Background(), imagecache.Config{Dir: t.TempDir(), AllowedSourceNetworks: imagecachetest.Loopback, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Pull(context.Background(), good); err != nil {
		t.Fatalf("Pull = %v", err)
	}
	if err := c.Pull(context.Background(), gone); imagecache.ReasonOf(err) != "http-404" {
		t.Fatalf("Pull of a removed image = %v (reason %q), want http-404", err, imagecache.ReasonOf(err))
	}
	if s := c.Stats(); s.PullsOK != 1 || s.BytesPulled != uint64(len("a disk image")) {
		t.Errorf("cache counters %+v", s)
	}
}

func Example() {
	origin := imagecachetest.NewOrigin()
	defer origin.Close()
	img := origin.Add([]byte("initrd bytes"), "raw")

	dir, _ := os.MkdirTemp("", "imagecachetest")
	defer os.RemoveAll(dir)
	cache, err := imagecache.Open(context.Background(), imagecache.Config{Dir: dir, AllowedSourceNetworks: imagecachetest.Loopback})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()
	fmt.Println(cache.Pull(context.Background(), img), cache.Stats().PullsOK)
	// Output: <nil> 1
}
