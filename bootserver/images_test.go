package bootserver_test

import (
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestCacheImages: the default format, and a malformed digest left out and named while
// the other images stay.
func TestCacheImages(t *testing.T) {
	good := strings.Repeat("ab", 32)
	out, err := bootserver.CacheImages([]sitelink.CacheImage{
		{URL: "http://192.0.2.1/a", SHA256: good}, {URL: "http://192.0.2.1/bad", SHA256: "xyz"},
		{URL: "http://192.0.2.1/iso", SHA256: good, Format: "iso"},
	})
	if err == nil || !strings.Contains(err.Error(), "/bad") {
		t.Errorf("err %v, want one naming the bad image", err)
	}
	if len(out) != 2 || out[0].Format != bootserver.DefaultImageFormat || out[1].Format != "iso" || out[0].SHA256.String() != good {
		t.Errorf("images %+v", out)
	}
}
