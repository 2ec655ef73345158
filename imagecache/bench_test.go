package imagecache_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
)

// countingWriter is a ResponseWriter that keeps the status and counts the body, so that a
// benchmark measures the handler and not a recorder's buffer.
type countingWriter struct {
	h      http.Header
	status int
	n      int64
}

func (w *countingWriter) Header() http.Header         { return w.h }
func (w *countingWriter) WriteHeader(status int)      { w.status = status }
func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// benchCache opens a cache holding one pulled image of size bytes.
func benchCache(b *testing.B, size int) (*imagecache.Cache, imagecache.Digest) {
	b.Helper()
	body := randomBytes(21, size)
	src := newSource(b, body, "good", false)
	cfg := fastConfig(b)
	cfg.Fence = imagecache.FenceFunc(func() (uint64, bool) { return 1, true }) // serving needs the lease
	c := open(b, cfg)
	img := imagecache.Image{URL: src.URL(), SHA256: sha256.Sum256(body), Format: "iso"}
	if err := c.Pull(context.Background(), img); err != nil {
		b.Fatal(err)
	}
	return c, img.SHA256
}

// BenchmarkServeRange64K is the handler's hot path for iPXE's sanboot of an ISO: a grant
// looked up, the image opened, and one 64 KiB range served (to a writer that discards). The
// writer has no ReadFrom, so io.Copy's 32 KiB buffer shows in B/op; net/http's response
// writer has one and sends the file with sendfile(2).
func BenchmarkServeRange64K(b *testing.B) {
	const size = 16 << 20
	c, d := benchCache(b, size)
	g, err := c.SanbootGrant(d, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	path := g.Path(imagecache.Digest{})
	ranges := make([]string, 256)
	for i := range ranges {
		off := (i * 7919 * 65536) % (size - 65536)
		ranges[i] = fmt.Sprintf("bytes=%d-%d", off, off+65535)
	}
	req := httptest.NewRequest(http.MethodGet, path, nil)
	b.SetBytes(65536)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req.Header.Set("Range", ranges[i%len(ranges)])
		w := &countingWriter{h: http.Header{}}
		c.ServeHTTP(w, req)
		if w.status != http.StatusPartialContent || w.n != 65536 {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
}

// BenchmarkServeRefused is a guessed grant: the answer every scan of /cache/ gets.
func BenchmarkServeRefused(b *testing.B) {
	c, d := benchCache(b, 4096)
	req := httptest.NewRequest(http.MethodGet, "/cache/t/0123456789abcdef0123456789abcdef/"+d.String(), nil)
	b.ReportAllocs()
	for b.Loop() {
		w := &countingWriter{h: http.Header{}}
		c.ServeHTTP(w, req)
		if w.status != http.StatusNotFound {
			b.Fatalf("status %d, want 404", w.status)
		}
	}
}

// BenchmarkBootGrant is the grant every boot script carries in bc.cache.
func BenchmarkBootGrant(b *testing.B) {
	c := open(b, fastConfig(b))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.BootGrant(time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}
