package imagecache_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
)

func FuzzParseDigest(f *testing.F) {
	f.Add("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
	f.Add("sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855")
	f.Add("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := imagecache.ParseDigest(s)
		if err != nil {
			return
		}
		if got := d.String(); got != strings.ToLower(strings.TrimPrefix(s, "sha256:")) {
			t.Fatalf("ParseDigest(%q).String() = %q", s, got)
		}
		if d2, err := imagecache.ParseDigest(d.String()); err != nil || d2 != d {
			t.Fatalf("round trip of %q: %v %v", s, d2, err)
		}
	})
}

// fuzzCache is a cache holding one image, and a boot grant for it.
func fuzzCache(f *testing.F) (*imagecache.Cache, []byte, imagecache.Digest, imagecache.Grant) {
	body := []byte("fuzzed image")
	d := imagecache.Digest(sha256.Sum256(body))
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	f.Cleanup(src.Close)
	c, err := imagecache.Open(context.Background(), imagecache.Config{
		Dir:                   f.TempDir(),
		Fence:                 imagecache.FenceFunc(func() (uint64, bool) { return 1, true }),
		AllowedSourceNetworks: loopback,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	if err := c.Pull(context.Background(), imagecache.Image{URL: src.URL, SHA256: d}); err != nil {
		f.Fatal(err)
	}
	g, err := c.BootGrant(time.Time{})
	if err != nil {
		f.Fatal(err)
	}
	return c, body, d, g
}

// Whatever method and path a client sends, only the one granted path serves, and every
// refusal is the same 404.
func FuzzServePath(f *testing.F) {
	c, _, d, g := fuzzCache(f)
	valid := g.Path(d)
	f.Add("GET", valid)
	f.Add("HEAD", valid)
	f.Add("POST", valid)
	f.Add("GET", "/cache/"+d.String())
	f.Add("GET", "/cache/t/"+strings.ToUpper(g.Token)+"/"+d.String())
	f.Add("GET", valid+"/../"+d.String())
	f.Add("GET", "/cache/t//"+d.String())
	f.Add("GET", "/cache/t/"+g.Token+"/"+d.String()[:63]+"\x00")
	f.Fuzz(func(t *testing.T, method, path string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Method, r.URL.Path = method, path
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		served := path == valid && (method == "GET" || method == "HEAD")
		switch {
		case served && w.Code != 200:
			t.Fatalf("%s %q = %d, want 200", method, path, w.Code)
		case !served && w.Code != 404:
			t.Fatalf("%s %q = %d, want 404", method, path, w.Code)
		case !served && w.Body.String() != "404 page not found\n":
			t.Fatalf("%s %q: 404 body differs", method, path)
		}
	})
}
