package imagecache_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
)

// The ramdisk's fetch: the cache first, the source as fallback, the digest checked on both;
// the destination never holds unverified bytes.
func TestFetch(t *testing.T) {
	body := randomBytes(400, 2<<20)
	d := imagecache.Digest(sha256.Sum256(body))
	tests := []struct {
		name       string
		cache, src string // source modes; "" for no URL
		wantFrom   string // "cache", "source", or "" for a failure
		wantErr    error
	}{
		{name: "cache good", cache: "good", src: "good", wantFrom: "cache"},
		{name: "cache substitutes bytes", cache: "wrong", src: "good", wantFrom: "source"},
		{name: "cache 404", cache: "404", src: "good", wantFrom: "source"},
		{name: "cache stalls", cache: "stall", src: "good", wantFrom: "source"},
		{name: "cache truncates once, resumed", cache: "truncateonce", src: "404", wantFrom: "cache"},
		{name: "no cache url", cache: "", src: "good", wantFrom: "source"},
		{name: "both wrong", cache: "wrong", src: "wrong", wantErr: imagecache.ErrDigestMismatch},
		{name: "cache wrong, source truncates", cache: "wrong", src: "truncate", wantErr: imagecache.ErrShortBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			urls := map[string]string{}
			var list []string
			for _, k := range []struct{ name, mode string }{{"cache", tt.cache}, {"source", tt.src}} {
				u := ""
				if k.mode != "" {
					u = newSource(t, body, k.mode, false).URL()
				}
				urls[u] = k.name
				list = append(list, u)
			}
			dir := t.TempDir()
			dst := filepath.Join(dir, "deploy.img")
			os.WriteFile(dst, []byte("previous contents"), 0o600)
			f := &imagecache.Fetcher{StallTimeout: time.Second, Retries: 1, RetryDelay: time.Millisecond}
			from, err := f.Fetch(context.Background(), d, dst, list...)
			got, _ := os.ReadFile(dst)
			if tt.wantFrom != "" {
				if err != nil {
					t.Fatalf("Fetch: %v", err)
				}
				if urls[from] != tt.wantFrom {
					t.Errorf("served from %s, want %s", urls[from], tt.wantFrom)
				}
				if !bytes.Equal(got, body) {
					t.Errorf("destination holds %d bytes that are not the image", len(got))
				}
			} else {
				var fe *imagecache.FetchError
				if !errors.As(err, &fe) || !errors.Is(err, tt.wantErr) {
					t.Fatalf("Fetch error %v, want a FetchError with %v", err, tt.wantErr)
				}
				if string(got) != "previous contents" {
					t.Errorf("a failed fetch changed the destination (%d bytes)", len(got))
				}
			}
			if des, _ := os.ReadDir(dir); len(des) != 1 {
				t.Errorf("files left beside the destination: %d, want only it", len(des))
			}
		})
	}
}

func TestFetchNoURL(t *testing.T) {
	f := &imagecache.Fetcher{}
	_, err := f.Fetch(context.Background(), imagecache.Digest{1}, filepath.Join(t.TempDir(), "x"), "", "")
	if !errors.Is(err, imagecache.ErrBadImage) {
		t.Errorf("Fetch without URLs = %v, want ErrBadImage", err)
	}
}
