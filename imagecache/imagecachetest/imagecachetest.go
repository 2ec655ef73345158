// Package imagecachetest provides an image origin for tests of a host that pulls images
// into an [imagecache.Cache]: an HTTP server on 127.0.0.1 that serves each image it holds
// at /sha256/DIGEST, with byte ranges (so resumed pulls are exercised) and counters of
// what it served.
//
// A cache refuses loopback sources unless told otherwise: open it with [Loopback] in
// Config.AllowedSourceNetworks.
package imagecachetest

import (
	"bytes"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
)

// Loopback is what Config.AllowedSourceNetworks must hold for a cache to pull from an
// Origin.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// Origin is an image server on 127.0.0.1 serving images by digest.
type Origin struct {
	// URL is the base URL, "http://127.0.0.1:PORT", without a trailing slash.
	URL string

	srv      *httptest.Server
	mu       sync.Mutex
	images   map[imagecache.Digest][]byte
	requests atomic.Uint64
	bytes    atomic.Uint64
	missing  atomic.Uint64
}

// NewOrigin starts an Origin serving bodies (more can be added with Add). Close it when
// done.
func NewOrigin(bodies ...[]byte) *Origin {
	o := &Origin{images: map[imagecache.Digest][]byte{}}
	o.srv = httptest.NewServer(http.HandlerFunc(o.serve))
	o.URL = o.srv.URL
	for _, b := range bodies {
		o.Add(b, "")
	}
	return o
}

// Add serves body (copied) and returns the image to pull it: its URL on this origin,
// its digest, and format.
func (o *Origin) Add(body []byte, format string) imagecache.Image {
	d := imagecache.Digest(sha256.Sum256(body))
	o.mu.Lock()
	o.images[d] = bytes.Clone(body)
	o.mu.Unlock()
	return imagecache.Image{URL: o.URL + "/sha256/" + d.String(), SHA256: d, Format: format}
}

// Remove stops serving the image: it answers 404 from then on.
func (o *Origin) Remove(d imagecache.Digest) {
	o.mu.Lock()
	delete(o.images, d)
	o.mu.Unlock()
}

// Stats are what an Origin served.
type Stats struct {
	Requests uint64 // requests received, for any path
	Bytes    uint64 // body bytes written
	NotFound uint64 // requests answered 404
}

// Stats returns the counters.
func (o *Origin) Stats() Stats {
	return Stats{Requests: o.requests.Load(), Bytes: o.bytes.Load(), NotFound: o.missing.Load()}
}

// Close shuts the origin down, like [httptest.Server.Close]: it returns once every
// request has ended and no goroutine of the origin is left.
func (o *Origin) Close() { o.srv.Close() }

func (o *Origin) serve(w http.ResponseWriter, r *http.Request) {
	o.requests.Add(1)
	hexd, ok := strings.CutPrefix(r.URL.Path, "/sha256/")
	d, err := imagecache.ParseDigest(hexd)
	var body []byte
	if ok && err == nil {
		o.mu.Lock()
		body, ok = o.images[d]
		o.mu.Unlock()
	}
	if !ok || err != nil {
		o.missing.Add(1)
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(countingWriter{w, &o.bytes}, r, "", time.Time{}, bytes.NewReader(body))
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Uint64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n.Add(uint64(n))
	return n, err
}
