package imagecache_test

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/imagecache"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	goleak.VerifyTestMain(m)
}

func newClock() *clocktest.Fake {
	return clocktest.New(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
}

// randomBytes returns n reproducible pseudo-random bytes.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// loopback lets the tests' sources, all on loopback, pass the source policy.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// fastConfig is a Config with quick retries and stalls for tests, allowing sources on
// loopback.
func fastConfig(t testing.TB) imagecache.Config {
	return imagecache.Config{
		Dir:                   t.TempDir(),
		StallTimeout:          2 * time.Second,
		RetryDelay:            time.Millisecond,
		MaxRetryDelay:         5 * time.Millisecond,
		AllowedSourceNetworks: loopback,
	}
}

func open(t testing.TB, cfg imagecache.Config) *imagecache.Cache {
	t.Helper()
	c, err := imagecache.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// visibleFiles lists the files of dir a handler could ever open: names of 64 hex digits.
func visibleFiles(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if _, err := imagecache.ParseDigest(de.Name()); err == nil {
			out = append(out, de.Name())
		}
	}
	return out
}

// allFiles lists every file of dir but the lock and the verification stamps.
func allFiles(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if de.Name() != ".lock" && !strings.HasPrefix(de.Name(), ".stamp-") {
			out = append(out, de.Name())
		}
	}
	return out
}

// checkVisibleVerified fails when a visible file's bytes do not hash to its name.
func checkVisibleVerified(t testing.TB, dir string) {
	t.Helper()
	for _, name := range visibleFiles(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := imagecache.Digest(sha256.Sum256(b)).String(); got != name {
			t.Errorf("visible file %s holds bytes hashing to %s", name, got)
		}
	}
}

// source is an HTTP image source whose misbehaviour tests choose.
type source struct {
	body []byte
	// good, wrong, truncate, stall, 404, 500once, truncateonce, stallonce; changing: cut
	// once, then wrong bytes on the resume; badrange: cut once, then a 206 for another range.
	mode string
	// noRange makes the source ignore Range headers (plain 200 with the whole body).
	noRange bool

	mu       sync.Mutex
	requests []string // "GET RANGE" of each request
	srv      *httptest.Server
	release  chan struct{}
}

func newSource(t testing.TB, body []byte, mode string, noRange bool) *source {
	s := &source{body: body, mode: mode, noRange: noRange, release: make(chan struct{})}
	s.srv = httptest.NewServer(s)
	t.Cleanup(func() {
		close(s.release)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
	return s
}

func (s *source) URL() string { return s.srv.URL + "/image" }

func (s *source) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *source) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.Header.Get("Range"))
	n := len(s.requests)
	s.mu.Unlock()
	body, start := s.body, 0
	if rng := r.Header.Get("Range"); rng != "" && !s.noRange {
		from, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rng, "bytes="), "-"))
		if err != nil || from >= len(body) {
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = from
		first := from
		if s.mode == "badrange" {
			first = 0 // claims another range than the one asked for
		}
		w.Header().Set("Content-Range", "bytes "+strconv.Itoa(first)+"-"+strconv.Itoa(len(body)-1)+"/"+strconv.Itoa(len(body)))
	}
	rest := body[start:]
	mode := s.mode
	switch {
	case mode == "404":
		http.NotFound(w, r)
		return
	case mode == "500once" && n == 1:
		http.Error(w, "busy", http.StatusInternalServerError)
		return
	case mode == "wrong", mode == "changing" && n == 2:
		rest = slices.Clone(rest)
		rest[len(rest)/2] ^= 1
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(rest)))
	if start > 0 {
		w.WriteHeader(http.StatusPartialContent)
	}
	cut := mode == "truncate" || mode == "stall" ||
		((mode == "truncateonce" || mode == "stallonce" || mode == "changing" || mode == "badrange") && n == 1)
	if !cut {
		w.Write(rest)
		return
	}
	w.Write(rest[:len(rest)/2])
	w.(http.Flusher).Flush()
	if strings.HasPrefix(mode, "stall") {
		select {
		case <-r.Context().Done():
		case <-s.release:
		}
		return
	}
	// Truncate: end the connection short of the announced length.
	panic(http.ErrAbortHandler)
}
