package imagecache_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/bettercompute/siteboot/imagecache"
)

// TestClosedCache: after Close, a pull fails with ErrServerClosed, reason "closed"; Shutdown
// and Close again return nil. TestMain's leak check covers the goroutines.
func TestClosedCache(t *testing.T) {
	body := randomBytes(31, 4000)
	src := newSource(t, body, "good", false)
	c, err := imagecache.Open(context.Background(), fastConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	err = c.Pull(context.Background(), imagecache.Image{URL: src.URL(), SHA256: sha256.Sum256(body), Format: "raw"})
	if !errors.Is(err, imagecache.ErrServerClosed) || imagecache.ReasonOf(err) != "closed" {
		t.Fatalf("Pull after Close = %v (reason %q), want ErrServerClosed", err, imagecache.ReasonOf(err))
	}
	if err := c.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown after Close = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}
