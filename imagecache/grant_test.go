package imagecache_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/imagecache"
)

// grantFixture is a cache holding two images, on a fake clock, with a fence tests flip.
type grantFixture struct {
	c          *imagecache.Cache
	clk        *clocktest.Fake
	fence      atomic.Bool
	img1, img2 imagecache.Image
	body1      []byte
	dir        string
}

func newGrantFixture(t *testing.T) *grantFixture {
	t.Helper()
	f := &grantFixture{clk: newClock()}
	f.fence.Store(true)
	f.body1 = randomBytes(11, 70000)
	body2 := randomBytes(12, 5000)
	src1 := newSource(t, f.body1, "good", false)
	src2 := newSource(t, body2, "good", false)
	cfg := fastConfig(t)
	cfg.Clock = f.clk
	cfg.Fence = boolFence{&f.fence}
	f.c = open(t, cfg)
	f.dir = cfg.Dir
	f.img1 = imagecache.Image{URL: src1.URL(), SHA256: sha256.Sum256(f.body1), Format: "iso"}
	f.img2 = imagecache.Image{URL: src2.URL(), SHA256: sha256.Sum256(body2), Format: "raw"}
	for _, img := range []imagecache.Image{f.img1, f.img2} {
		if err := f.c.Pull(context.Background(), img); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *grantFixture) get(method, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	f.c.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

func TestGrants(t *testing.T) {
	f := newGrantFixture(t)
	d1, d2 := f.img1.SHA256, f.img2.SHA256
	uncached := imagecache.Digest(sha256.Sum256([]byte("not cached")))
	boot, err := f.c.BootGrant(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	short, err := f.c.BootGrant(f.clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	iso, err := f.c.SanbootGrant(d1, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	fw, err := f.c.FirmwareGrant(d2)
	if err != nil {
		t.Fatal(err)
	}
	revoked, _ := f.c.FirmwareGrant(d2)
	f.c.Revoke(revoked.Token)
	if boot.NotAfter != f.clk.Now().Add(6*time.Hour) || fw.NotAfter != f.clk.Now().Add(2*time.Hour) {
		t.Errorf("not-after: boot %v firmware %v, want +6h and +2h from %v", boot.NotAfter, fw.NotAfter, f.clk.Now())
	}
	wrong := strings.Repeat("0", 32)
	upper := strings.ToUpper(boot.Token)

	type req struct {
		name    string
		advance time.Duration // moves the clock before this request
		fenced  bool
		method  string
		path    string
		want    int
	}
	tests := []req{
		{name: "boot grant, any image", path: boot.Path(d1), want: 200},
		{name: "boot grant, another image", path: boot.Path(d2), want: 200},
		{name: "boot grant, HEAD", method: "HEAD", path: boot.Path(d2), want: 200},
		{name: "boot grant, image not cached", path: boot.Path(uncached), want: 404},
		{name: "sanboot grant, its ISO", path: iso.Path(imagecache.Digest{}), want: 200},
		{name: "sanboot grant, other digest", path: iso.Path(d2), want: 404},
		{name: "firmware grant", path: fw.Path(d2), want: 200},
		{name: "firmware grant, other digest", path: fw.Path(d1), want: 404},
		{name: "revoked grant", path: revoked.Path(d2), want: 404},
		{name: "wrong grant", path: "/cache/t/" + wrong + "/" + d1.String(), want: 404},
		{name: "upper-case grant", path: "/cache/t/" + upper + "/" + d1.String(), want: 404},
		{name: "upper-case digest", path: "/cache/t/" + boot.Token + "/" + strings.ToUpper(d1.String()), want: 404},
		{name: "plain /cache/SHA", path: "/cache/" + d1.String(), want: 404},
		{name: "grant without digest", path: "/cache/t/" + boot.Token, want: 404},
		{name: "trailing slash", path: boot.Path(d1) + "/", want: 404},
		{name: "POST", method: "POST", path: boot.Path(d1), want: 404},
		{name: "PUT", method: "PUT", path: boot.Path(d1), want: 404},
		{name: "DELETE", method: "DELETE", path: boot.Path(d1), want: 404},
		{name: "fenced boot grant", fenced: true, path: boot.Path(d1), want: 503},
		{name: "fenced sanboot grant", fenced: true, path: iso.Path(d1), want: 503},
		{name: "fenced, sanboot grant for other digest", fenced: true, path: iso.Path(d2), want: 404},
		{name: "fenced firmware grant", fenced: true, path: fw.Path(d2), want: 200},
		{name: "unfenced again", path: boot.Path(d1), want: 200},
		{name: "short boot grant before not-after", advance: time.Hour - time.Second, path: short.Path(d1), want: 200},
		{name: "short boot grant at not-after", advance: time.Second, path: short.Path(d1), want: 404},
		{name: "short boot grant, forgotten", path: short.Path(d1), want: 404},
		{name: "firmware grant expired", advance: time.Hour, path: fw.Path(d2), want: 404},
		{name: "boot grant still valid at 5h59m", advance: 4*time.Hour - time.Minute, path: boot.Path(d1), want: 200},
		{name: "boot grant expired at 6h", advance: time.Minute, path: boot.Path(d1), want: 404},
		{name: "sanboot grant expired at 6h", path: iso.Path(d1), want: 404},
	}
	for _, tt := range tests {
		f.clk.Advance(tt.advance)
		f.fence.Store(!tt.fenced)
		method := tt.method
		if method == "" {
			method = "GET"
		}
		w := f.get(method, tt.path)
		if w.Code != tt.want {
			t.Errorf("%s: %s %s = %d, want %d", tt.name, method, tt.path, w.Code, tt.want)
		}
		if tt.want == 404 && w.Body.String() != "404 page not found\n" {
			t.Errorf("%s: 404 body differs from the plain one (%d bytes)", tt.name, w.Body.Len())
		}
		if tt.want == 200 && method == "GET" && strings.HasSuffix(tt.path, d1.String()) && !bytes.Equal(w.Body.Bytes(), f.body1) {
			t.Errorf("%s: body differs from the image", tt.name)
		}
	}
	s := f.c.Stats()
	got := []uint64{s.RefusedPath, s.RefusedGrant, s.RefusedExpired, s.RefusedDigest, s.RefusedMissing, s.RefusedFenced, s.Served}
	want := []uint64{8, 3, 4, 3, 1, 2, 9}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refusals path/grant/expired/digest/missing/fenced, served (-want +got):\n%s", diff)
	}
}

// A nil Fence never lets a boot grant serve; firmware grants do not depend on it.
func TestNilFenceFailsClosed(t *testing.T) {
	body := randomBytes(13, 100)
	src := newSource(t, body, "good", false)
	c := open(t, fastConfig(t))
	img := imagecache.Image{URL: src.URL(), SHA256: sha256.Sum256(body)}
	if err := c.Pull(context.Background(), img); err != nil {
		t.Fatal(err)
	}
	boot, _ := c.BootGrant(time.Time{})
	fw, _ := c.FirmwareGrant(img.SHA256)
	for path, want := range map[string]int{boot.Path(img.SHA256): 503, fw.Path(img.SHA256): 200} {
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != want {
			t.Errorf("GET %s = %d, want %d", path, w.Code, want)
		}
	}
}

func TestGrantIssue(t *testing.T) {
	clk := newClock()
	cfg := fastConfig(t)
	cfg.Clock = clk
	cfg.MaxGrants = 100
	// A counting source: tokens are exactly what Rand gave.
	var calls uint64
	cfg.Rand = readerFunc(func(p []byte) (int, error) {
		for i := range p {
			p[i] = byte(i + 1)
		}
		binary.BigEndian.PutUint64(p, calls)
		calls++
		return len(p), nil
	})
	c := open(t, cfg)
	g, err := c.BootGrant(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Token != "0000000000000000090a0b0c0d0e0f10" || g.Kind != imagecache.GrantBoot {
		t.Errorf("grant %+v: token not the 16 random bytes in hex", g)
	}
	if _, err := c.BootGrant(clk.Now()); !errors.Is(err, imagecache.ErrBadGrant) {
		t.Errorf("BootGrant(now) = %v, want ErrBadGrant", err)
	}
	if _, err := c.FirmwareGrant(imagecache.Digest{}); !errors.Is(err, imagecache.ErrBadGrant) {
		t.Errorf("FirmwareGrant(zero) = %v, want ErrBadGrant", err)
	}
	// Bounded: the table fills, then frees itself as grants expire.
	for c.GrantCount() < 100 {
		if _, err := c.BootGrant(clk.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.BootGrant(clk.Now().Add(time.Minute)); !errors.Is(err, imagecache.ErrGrantLimit) {
		t.Fatalf("grant 101 = %v, want ErrGrantLimit", err)
	}
	clk.Advance(time.Minute)
	if _, err := c.BootGrant(time.Time{}); err != nil {
		t.Fatalf("grant after expiry: %v", err)
	}
	if n := c.GrantCount(); n != 2 {
		t.Errorf("GrantCount after the expired were swept: %d, want 2", n)
	}
	// Periodic sweep even below the limit.
	clk.Advance(6 * time.Hour)
	c.FirmwareGrant(imagecache.Digest{1})
	if n := c.GrantCount(); n != 1 {
		t.Errorf("GrantCount after a sweep: %d, want 1", n)
	}
	// A broken random source is an error, not a weak grant.
	cfg2 := fastConfig(t)
	cfg2.Rand = readerFunc(func([]byte) (int, error) { return 0, errors.New("no entropy") })
	if _, err := open(t, cfg2).BootGrant(time.Time{}); err == nil {
		t.Error("BootGrant with a failing Rand succeeded")
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// discardWriter is a minimal ResponseWriter for the guessing loop.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// A million random grants for a cached image, with 1000 live grants issued: none serves.
func TestGrantGuessing(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t)
	for range 1000 {
		if _, err := f.c.BootGrant(time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	guesses := 1_000_000
	if testing.Short() {
		guesses = 10_000
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	r := httptest.NewRequest("GET", "/", nil)
	suffix := "/" + f.img1.SHA256.String()
	var tok [16]byte
	buf := make([]byte, 0, 128)
	w := &discardWriter{h: http.Header{}}
	hits := 0
	for range guesses {
		for i := 0; i < 16; i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				tok[i+j] = byte(v >> (8 * j))
			}
		}
		buf = append(hex.AppendEncode(append(buf[:0], "/cache/t/"...), tok[:]), suffix...)
		r.URL.Path = string(buf)
		w.code = 0
		clear(w.h)
		f.c.ServeHTTP(w, r)
		if w.code != http.StatusNotFound {
			hits++
		}
	}
	if hits != 0 {
		t.Errorf("%d of %d random grants were not refused", hits, guesses)
	}
	if s := f.c.Stats(); s.RefusedGrant != uint64(guesses) {
		t.Errorf("RefusedGrant = %d, want %d", s.RefusedGrant, guesses)
	}
}

// Keyed grants are reused while they fit, so a script rendered per request does not grow the
// table; a changed not-after or scope gets a new grant and the old one keeps working.
func TestGrantReuseByKey(t *testing.T) {
	f := newGrantFixture(t)
	entryEnd := f.clk.Now().Add(2 * time.Hour)
	first, err := f.c.BootGrantFor("aa:bb:cc:dd:ee:ff/wf1", entryEnd)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		g, err := f.c.BootGrantFor("aa:bb:cc:dd:ee:ff/wf1", entryEnd)
		if err != nil || g != first {
			t.Fatalf("BootGrantFor again = %+v, %v; want the first grant", g, err)
		}
	}
	if n := f.c.GrantCount(); n != 1 {
		t.Errorf("GrantCount after 1001 keyed issues: %d, want 1", n)
	}
	// Zero not-after: any live grant of the key serves.
	if g, _ := f.c.BootGrantFor("aa:bb:cc:dd:ee:ff/wf1", time.Time{}); g != first {
		t.Errorf("BootGrantFor with no not-after = %+v, want the first grant", g)
	}
	// A sanboot grant under another key, then one for another ISO under the same key.
	iso1, _ := f.c.SanbootGrantFor("11:22:33:44:55:66/wf2", f.img1.SHA256, entryEnd)
	iso2, _ := f.c.SanbootGrantFor("11:22:33:44:55:66/wf2", f.img2.SHA256, entryEnd)
	if iso1.Token == iso2.Token || iso2.Digest != f.img2.SHA256 {
		t.Errorf("another ISO under the same key reused the grant: %+v %+v", iso1, iso2)
	}
	// The entry is extended: a new grant; the old URL still serves until it expires.
	extended, _ := f.c.BootGrantFor("aa:bb:cc:dd:ee:ff/wf1", entryEnd.Add(time.Hour))
	if extended.Token == first.Token {
		t.Error("a new not-after reused the old grant")
	}
	for _, p := range []string{first.Path(f.img1.SHA256), extended.Path(f.img1.SHA256), iso1.Path(imagecache.Digest{})} {
		if w := f.get("GET", p); w.Code != 200 {
			t.Errorf("GET %s = %d, want 200", p, w.Code)
		}
	}
	f.clk.Advance(2 * time.Hour)
	if w := f.get("GET", first.Path(f.img1.SHA256)); w.Code != 404 {
		t.Errorf("old grant after its not-after: %d, want 404", w.Code)
	}
	if w := f.get("GET", extended.Path(f.img1.SHA256)); w.Code != 200 {
		t.Errorf("extended grant: %d, want 200", w.Code)
	}
	// Revoking by key ends the current grant at once.
	f.c.RevokeKey("aa:bb:cc:dd:ee:ff/wf1")
	if w := f.get("GET", extended.Path(f.img1.SHA256)); w.Code != 404 {
		t.Errorf("after RevokeKey: %d, want 404", w.Code)
	}
	if g, _ := f.c.BootGrantFor("aa:bb:cc:dd:ee:ff/wf1", entryEnd.Add(time.Hour)); g.Token == extended.Token {
		t.Error("a revoked grant was handed out again")
	}
}
