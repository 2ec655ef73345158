package imagecache_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/internal/testpeer"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted at cleanup.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	testpeer.RequireRoot(t)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)+",mode=0700"); err != nil {
		testpeer.Unavailable(t, "mount tmpfs on %s: %v (needs CAP_SYS_ADMIN)", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// Root: on a 4 MiB tmpfs, an image that does not fit fails at once with ErrNoSpace, leaves
// no temp file and no space used, and the cache keeps working.
func TestDiskFullTmpfsRoot(t *testing.T) {
	dir := mountTmpfs(t, 4<<20)
	small := randomBytes(500, 1<<20)
	big := randomBytes(501, 6<<20)
	other := randomBytes(502, 1<<20)
	srcSmall := newSource(t, small, "good", false)
	srcBig := newSource(t, big, "good", false)
	srcOther := newSource(t, other, "good", false)
	cfg := fastConfig(t)
	cfg.Dir = dir
	c := open(t, cfg)
	imgSmall := imagecache.Image{URL: srcSmall.URL(), SHA256: sha256.Sum256(small)}
	imgBig := imagecache.Image{URL: srcBig.URL(), SHA256: sha256.Sum256(big)}
	imgOther := imagecache.Image{URL: srcOther.URL(), SHA256: sha256.Sum256(other)}
	if err := c.Pull(context.Background(), imgSmall); err != nil {
		t.Fatal(err)
	}
	free := freeBytes(t, dir)

	err := c.Pull(context.Background(), imgBig)
	var pe *imagecache.PullError
	if !errors.As(err, &pe) || !errors.Is(err, imagecache.ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Pull of an image larger than the disk = %v, want a PullError with ErrNoSpace", err)
	}
	if pe.Attempts != 1 {
		t.Errorf("a full disk was retried: %d attempts", pe.Attempts)
	}
	if n := len(srcBig.Requests()); n != 1 {
		t.Errorf("source asked %d times, want 1", n)
	}
	for _, f := range allFiles(t, dir) {
		if strings.HasPrefix(f, ".pull-") {
			t.Errorf("temp file %s left after the failed pull", f)
		}
	}
	if got := freeBytes(t, dir); got != free {
		t.Errorf("free space after the failed pull %d, want %d as before", got, free)
	}
	checkVisibleVerified(t, dir)
	inv := c.Inventory()
	if len(inv) != 1 || inv[0].Digest != imgSmall.SHA256 {
		t.Errorf("Inventory after the failed pull: %+v, want only the small image", inv)
	}
	if err := c.Pull(context.Background(), imgOther); err != nil {
		t.Fatalf("Pull of an image that fits, after the failure: %v", err)
	}
	c.Close()
	c2 := open(t, imagecache.Config{Dir: dir})
	if n := len(c2.Inventory()); n != 2 {
		t.Errorf("reopened: %d images, want 2", n)
	}
}
