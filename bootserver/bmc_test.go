package bootserver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/clock/clocktest"
)

// TestBMCImages: an image not cached is refused; a minted URL serves the image under its
// own grant until it is revoked.
func TestBMCImages(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, ims := openCache(t, clk, "firmware")
	base := "http://192.0.2.2/cache/"
	b := bootserver.BMCImages{Cache: c, BaseURL: base}
	sum := ims[0].SHA256.String()
	if err := b.Check(strings.Repeat("cd", 32)); err == nil {
		t.Error("an image not in the cache passed Check")
	}
	if err := b.Check(sum); err != nil {
		t.Fatalf("Check of a cached image: %v", err)
	}
	u, grant, err := b.Mint(sum)
	if err != nil {
		t.Fatal(err)
	}
	if want := "http://192.0.2.2/cache/t/" + grant + "/" + sum; u != want || grant == "" {
		t.Fatalf("Mint = %q, %q; want %q", u, grant, want)
	}
	base = strings.TrimSuffix(base, "/")
	if st, body := fetch(c, base, u); st != http.StatusOK || body != "the firmware image" {
		t.Fatalf("the minted URL: %d %q", st, body)
	}
	b.Revoke(grant)
	if st, _ := fetch(c, base, u); st != http.StatusNotFound {
		t.Errorf("the revoked URL: %d, want 404", st)
	}
}
