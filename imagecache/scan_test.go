package imagecache_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/google/go-cmp/cmp"
)

// Open removes leftover temp files, and the re-verification after it files whose bytes do
// not match their name; verified images keep their mtime as last use; what is not the
// cache's own is ignored.
func TestOpenScan(t *testing.T) {
	dir := t.TempDir()
	good := randomBytes(300, 5000)
	gd := imagecache.Digest(sha256.Sum256(good))
	bad := randomBytes(301, 5000)
	bd := imagecache.Digest(sha256.Sum256(bad))
	bad[100] ^= 0xff
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(gd.String(), good)
	os.Chtimes(filepath.Join(dir, gd.String()), mtime, mtime)
	write(bd.String(), bad)
	write(".pull-"+gd.String()+"-123", good[:100])
	write("README", []byte("operator's note"))
	write(gd.String()[:63], good) // not a digest name

	c := open(t, imagecache.Config{Dir: dir})
	if err := c.WaitVerified(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []imagecache.Item{{Digest: gd, Size: 5000, LastUsed: mtime}}
	if diff := cmp.Diff(want, c.Inventory()); diff != "" {
		t.Errorf("Inventory (-want +got):\n%s", diff)
	}
	wantFiles := []string{gd.String()[:63], gd.String(), "README"}
	slices.Sort(wantFiles)
	if diff := cmp.Diff(wantFiles, allFiles(t, dir)); diff != "" {
		t.Errorf("files after Open (-want +got):\n%s", diff)
	}
	if s := c.Stats(); s.TempFilesRemoved != 1 || s.CorruptFilesRemoved != 1 {
		t.Errorf("TempFilesRemoved %d CorruptFilesRemoved %d, want 1 and 1", s.TempFilesRemoved, s.CorruptFilesRemoved)
	}
	// A second process (or cache) on the same directory is refused.
	if _, err := imagecache.Open(context.Background(), imagecache.Config{Dir: dir}); !errors.Is(err, imagecache.ErrLocked) {
		t.Errorf("second Open = %v, want ErrLocked", err)
	}
	// Naming the image restores its format; the pinned image is ready without a pull.
	c.SetPinned([]imagecache.Image{{URL: "http://192.0.2.1/never", SHA256: gd, Format: "qcow2"}})
	st := c.Status()
	if len(st) != 1 || st[0].State != imagecache.StateReady || st[0].Bytes != 5000 {
		t.Errorf("Status = %+v, want one ready image of 5000 bytes", st)
	}
	if it, _ := c.Lookup(gd); it.Format != "qcow2" || !it.Pinned {
		t.Errorf("Lookup = %+v, want format qcow2, pinned", it)
	}
	c.Close()
	// Reopened, the image is served at once on its stamp: nothing to hash again.
	c2 := open(t, imagecache.Config{Dir: dir})
	if n := len(c2.Inventory()); n != 1 {
		t.Errorf("reopen after Close: %d images, want 1", n)
	}
	if s := c2.Stats(); s.StampMatched != 1 || s.Reverified != 0 {
		t.Errorf("reopen: StampMatched %d Reverified %d, want 1 and 0", s.StampMatched, s.Reverified)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []imagecache.Config{
		{},
		{Dir: "x", MaxBytes: -1},
		{Dir: "x", ConcurrentPulls: -1},
		{Dir: "x", StallTimeout: -time.Second},
		{Dir: "x", MaxGrants: -1},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", cfg)
		}
		if _, err := imagecache.Open(context.Background(), cfg); err == nil {
			t.Errorf("Open(%+v) = nil error", cfg)
		}
	}
}
