package imagecache_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/google/go-cmp/cmp"
)

// Ranges, HEAD and conditional requests over a real loopback connection, the way iPXE's
// sanboot reads an ISO.
func TestServeRanges(t *testing.T) {
	f := newGrantFixture(t)
	srv := httptest.NewServer(f.c)
	t.Cleanup(srv.Close)
	g, err := f.c.SanbootGrant(f.img1.SHA256, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	url := srv.URL + g.Path(imagecache.Digest{})
	etag := `"` + f.img1.SHA256.String() + `"`
	size := len(f.body1)
	tests := []struct {
		name     string
		method   string
		header   map[string]string
		code     int
		body     []byte
		rangeHdr string
	}{
		{name: "whole", code: 200, body: f.body1},
		{name: "HEAD", method: "HEAD", code: 200, body: []byte{}},
		{name: "first sector", header: map[string]string{"Range": "bytes=0-2047"}, code: 206, body: f.body1[:2048], rangeHdr: "bytes 0-2047/70000"},
		{name: "middle", header: map[string]string{"Range": "bytes=32768-34815"}, code: 206, body: f.body1[32768:34816], rangeHdr: "bytes 32768-34815/70000"},
		{name: "suffix", header: map[string]string{"Range": "bytes=-100"}, code: 206, body: f.body1[size-100:], rangeHdr: "bytes 69900-69999/70000"},
		{name: "open end", header: map[string]string{"Range": "bytes=69990-"}, code: 206, body: f.body1[69990:], rangeHdr: "bytes 69990-69999/70000"},
		{name: "past the end", header: map[string]string{"Range": "bytes=70000-"}, code: 416, body: nil},
		{name: "if-none-match", header: map[string]string{"If-None-Match": etag}, code: 304, body: []byte{}},
		{name: "if-range match", header: map[string]string{"Range": "bytes=0-9", "If-Range": etag}, code: 206, body: f.body1[:10], rangeHdr: "bytes 0-9/70000"},
		{name: "if-range stale", header: map[string]string{"Range": "bytes=0-9", "If-Range": `"other"`}, code: 200, body: f.body1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = "GET"
			}
			req, _ := http.NewRequest(method, url, nil)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.code)
			}
			if tt.body != nil && !bytes.Equal(body, tt.body) {
				t.Errorf("body: %d bytes, want %d (or different bytes)", len(body), len(tt.body))
			}
			if got := resp.Header.Get("Content-Range"); tt.rangeHdr != "" && got != tt.rangeHdr {
				t.Errorf("Content-Range %q, want %q", got, tt.rangeHdr)
			}
			if tt.code == 200 || tt.code == 206 || tt.code == 304 {
				if got := resp.Header.Get("ETag"); got != etag {
					t.Errorf("ETag %q, want %q", got, etag)
				}
			}
			if tt.code == 200 && method == "HEAD" && resp.ContentLength != int64(size) {
				t.Errorf("HEAD Content-Length %d, want %d", resp.ContentLength, size)
			}
		})
	}
}

// blockingWriter holds a response mid-body until released.
type blockingWriter struct {
	http.ResponseWriter
	started chan struct{}
	release chan struct{}
	buf     bytes.Buffer
	once    bool
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if !w.once {
		w.once = true
		close(w.started)
		<-w.release
	}
	return w.buf.Write(p)
}

// LRU eviction under a byte budget: least recently used first, never a pinned image and
// never one being served.
func TestEviction(t *testing.T) {
	clk := newClock()
	cfg := fastConfig(t)
	cfg.Clock = clk
	cfg.MaxBytes = 3000
	cfg.Fence = imagecache.FenceFunc(func() (uint64, bool) { return 1, true })
	c := open(t, cfg)
	var imgs []imagecache.Image
	for i := range 5 {
		body := randomBytes(uint64(100+i), 1000)
		src := newSource(t, body, "good", false)
		imgs = append(imgs, imagecache.Image{URL: src.URL(), SHA256: sha256.Sum256(body), Format: "raw"})
	}
	pull := func(img imagecache.Image) {
		t.Helper()
		clk.Advance(time.Minute)
		if err := c.Pull(context.Background(), img); err != nil {
			t.Fatal(err)
		}
	}
	cached := func() []imagecache.Digest {
		var out []imagecache.Digest
		for _, it := range c.Inventory() {
			out = append(out, it.Digest)
		}
		return out
	}
	set := func(ds ...imagecache.Digest) []imagecache.Digest {
		var out []imagecache.Digest
		for _, img := range imgs {
			for _, d := range ds {
				if d == img.SHA256 {
					out = append(out, d)
				}
			}
		}
		// Inventory is ordered by digest.
		for i := range out {
			for j := i + 1; j < len(out); j++ {
				if bytes.Compare(out[j][:], out[i][:]) < 0 {
					out[i], out[j] = out[j], out[i]
				}
			}
		}
		return out
	}
	d := func(i int) imagecache.Digest { return imgs[i].SHA256 }

	// 0 is pinned; 1 and 2 are cached after it; 1 is then served, so 2 is the oldest used.
	if err := c.SetPinned([]imagecache.Image{imgs[0]}); err != nil {
		t.Fatal(err)
	}
	pull(imgs[0])
	pull(imgs[1])
	pull(imgs[2])
	grant, _ := c.BootGrant(time.Time{})
	clk.Advance(time.Minute)
	w := httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest("GET", grant.Path(d(1)), nil))
	if w.Code != 200 {
		t.Fatalf("serve: %d", w.Code)
	}
	pull(imgs[3]) // 4000 bytes: the least recently used unpinned (2) goes
	if diff := cmp.Diff(set(d(0), d(1), d(3)), cached()); diff != "" {
		t.Errorf("after pulling 3 (-want +got):\n%s", diff)
	}

	// 1 is being served (held mid-body) when 4 arrives: 3 goes though 1 is older.
	clk.Advance(time.Minute)
	bw := &blockingWriter{ResponseWriter: httptest.NewRecorder(), started: make(chan struct{}), release: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		c.ServeHTTP(bw, httptest.NewRequest("GET", grant.Path(d(1)), nil))
	}()
	<-bw.started
	if it, _ := c.Lookup(d(1)); it.InUse != 1 {
		t.Errorf("InUse while served = %d, want 1", it.InUse)
	}
	clk.Advance(-2 * time.Minute) // make 1's use older than 3's pull
	pull(imgs[4])
	close(bw.release)
	<-served
	if diff := cmp.Diff(set(d(0), d(1), d(4)), cached()); diff != "" {
		t.Errorf("after pulling 4 while 1 is served (-want +got):\n%s", diff)
	}
	if got := sha256.Sum256(bw.buf.Bytes()); imagecache.Digest(got) != d(1) {
		t.Error("the image served during the eviction pass differs")
	}

	// Unpinning 0 makes it the oldest: the next trim after a pull removes it.
	c.SetPinned(nil)
	pull(imgs[2])
	if diff := cmp.Diff(set(d(1), d(2), d(4)), cached()); diff != "" {
		t.Errorf("after unpinning 0 and pulling 2 (-want +got):\n%s", diff)
	}
	if s := c.Stats(); s.Evictions != 3 || s.EvictedBytes != 3000 {
		t.Errorf("Evictions %d EvictedBytes %d, want 3 and 3000", s.Evictions, s.EvictedBytes)
	}
	// Pinned images are never evicted, even over the budget.
	c.SetPinned(imgs)
	for _, img := range imgs {
		pull(img)
	}
	if n := len(c.Inventory()); n != 5 {
		t.Errorf("with all pinned: %d cached, want 5", n)
	}
	if files := visibleFiles(t, cfg.Dir); len(files) != 5 {
		t.Errorf("files on disk: %d, want 5", len(files))
	}
}

// A cached file removed from the directory by someone else while the handler serves it is
// still served whole (the handler holds the open file); later requests get 404.
func TestServeUnlinkedFile(t *testing.T) {
	f := newGrantFixture(t)
	g, _ := f.c.BootGrant(time.Time{})
	bw := &blockingWriter{ResponseWriter: httptest.NewRecorder(), started: make(chan struct{}), release: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		f.c.ServeHTTP(bw, httptest.NewRequest("GET", g.Path(f.img1.SHA256), nil))
	}()
	<-bw.started
	rmErr := os.Remove(filepath.Join(f.dir, f.img1.SHA256.String()))
	close(bw.release)
	<-served
	if rmErr != nil {
		t.Fatal(rmErr)
	}
	if !bytes.Equal(bw.buf.Bytes(), f.body1) {
		t.Errorf("served %d bytes after the unlink, want the whole image of %d", bw.buf.Len(), len(f.body1))
	}
	w := httptest.NewRecorder()
	f.c.ServeHTTP(w, httptest.NewRequest("GET", g.Path(f.img1.SHA256), nil))
	if w.Code != 404 {
		t.Errorf("after the file is gone: %d, want 404", w.Code)
	}
	if _, ok := f.c.Lookup(f.img1.SHA256); ok {
		t.Error("a file gone from disk is still in the inventory")
	}
	// A pinned image that vanished is pulled again.
	f.c.SetPinned([]imagecache.Image{f.img2})
	os.Remove(filepath.Join(f.dir, f.img2.SHA256.String()))
	f.c.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", g.Path(f.img2.SHA256), nil))
	if err := f.c.Pull(context.Background(), f.img2); err != nil {
		t.Fatal(err)
	}
	if got := visibleFiles(t, f.dir); len(got) != 1 || got[0] != f.img2.SHA256.String() {
		t.Errorf("after the vanished pinned image was pulled again: files %v", got)
	}
}

// TestServeRangesBounded performs the range attack: a grant holder asks for one
// part of an image many times over in one request; the answer holds that part once.
// Overlapping, adjacent and nearby ranges are merged (in order); more than MaxRanges left
// after merging answer 416; a few distinct ranges are still served as a multipart answer.
func TestServeRangesBounded(t *testing.T) {
	f := newGrantFixture(t)
	srv := httptest.NewServer(f.c)
	t.Cleanup(srv.Close)
	g, err := f.c.SanbootGrant(f.img1.SHA256, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	url := srv.URL + g.Path(imagecache.Digest{})
	spaced := func(n, step int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf("%d-%d", i*step, i*step))
		}
		return "bytes=" + strings.Join(parts, ",")
	}
	tests := []struct {
		name, rangeHdr string
		code           int
		contentRange   string // for a single part; "" for multipart
		body           []byte // for a single part
		parts          int    // for multipart
	}{
		{name: "one part a thousand times", rangeHdr: "bytes=" + strings.Repeat("0-63,", 1000),
			code: 206, contentRange: "bytes 0-63/70000", body: f.body1[:64]},
		{name: "overlapping, unsorted", rangeHdr: "bytes=500-599,0-99,50-549",
			code: 206, contentRange: "bytes 0-599/70000", body: f.body1[:600]},
		{name: "adjacent", rangeHdr: "bytes=0-99,100-199",
			code: 206, contentRange: "bytes 0-199/70000", body: f.body1[:200]},
		{name: "suffix overlapping the rest", rangeHdr: "bytes=69000-,-2000",
			code: 206, contentRange: "bytes 68000-69999/70000", body: f.body1[68000:]},
		{name: "three far apart", rangeHdr: "bytes=0-9,30000-30009,60000-60009", code: 206, parts: 3},
		{name: "MaxRanges far apart", rangeHdr: spaced(imagecache.MaxRanges, 1000), code: 206, parts: imagecache.MaxRanges},
		{name: "more than MaxRanges far apart", rangeHdr: spaced(imagecache.MaxRanges+1, 1000), code: 416, contentRange: "bytes */70000"},
		{name: "does not parse", rangeHdr: "bytes=abc", code: 416},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.c.Stats().RefusedRanges
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("Range", tt.rangeHdr)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d (%d bytes), want %d", resp.StatusCode, len(body), tt.code)
			}
			if len(body) > len(tt.rangeHdr)+4096 {
				t.Errorf("%d bytes back for a Range header of %d bytes", len(body), len(tt.rangeHdr))
			}
			if got := resp.Header.Get("Content-Range"); got != tt.contentRange {
				t.Errorf("Content-Range %q, want %q", got, tt.contentRange)
			}
			if tt.body != nil && !bytes.Equal(body, tt.body) {
				t.Errorf("body: %d bytes, want %d (or different bytes)", len(body), len(tt.body))
			}
			if tt.parts > 0 {
				mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
				if err != nil || mt != "multipart/byteranges" {
					t.Fatalf("Content-Type %q, want multipart/byteranges", resp.Header.Get("Content-Type"))
				}
				mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
				n := 0
				for {
					p, err := mr.NextPart()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					var first, last, total int
					if _, err := fmt.Sscanf(p.Header.Get("Content-Range"), "bytes %d-%d/%d", &first, &last, &total); err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(p)
					if !bytes.Equal(b, f.body1[first:last+1]) {
						t.Errorf("part %s: wrong bytes", p.Header.Get("Content-Range"))
					}
					n++
				}
				if n != tt.parts {
					t.Errorf("%d parts, want %d", n, tt.parts)
				}
			}
			wantRefused := before
			if tt.code == 416 && tt.contentRange != "" {
				wantRefused++
			}
			if got := f.c.Stats().RefusedRanges; got != wantRefused {
				t.Errorf("RefusedRanges %d, want %d", got, wantRefused)
			}
		})
	}
}
