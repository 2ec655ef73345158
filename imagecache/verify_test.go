package imagecache_test

import (
	"context"
	"crypto/sha256"
	"encoding"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/google/go-cmp/cmp"
)

// sparseImages writes n sparse files of size bytes into dir, each zeros but for an 8-byte
// tail of its own, and returns their digests. The zeros are hashed once: each digest starts
// from a copy of that hash state. Hashing such a file costs what hashing any file of its
// size costs; reading it costs no disk.
func sparseImages(t testing.TB, dir string, n int, size int64) []imagecache.Digest {
	t.Helper()
	h := sha256.New()
	zeros := make([]byte, 1<<20)
	body := size - 8
	for left := body; left > 0; left -= int64(len(zeros)) {
		h.Write(zeros[:min(left, int64(len(zeros)))])
	}
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out []imagecache.Digest
	for i := range n {
		tail := []byte(fmt.Sprintf("tail%04d", i))
		hi := sha256.New()
		if err := hi.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
			t.Fatal(err)
		}
		hi.Write(tail)
		var d imagecache.Digest
		hi.Sum(d[:0])
		f, err := os.Create(filepath.Join(dir, d.String()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(tail, body); err != nil {
			t.Fatal(err)
		}
		f.Close()
		out = append(out, d)
	}
	return out
}

func writeImage(t testing.TB, dir string, b []byte) imagecache.Digest {
	t.Helper()
	d := imagecache.Digest(sha256.Sum256(b))
	if err := os.WriteFile(filepath.Join(dir, d.String()), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

// get fetches image d under grant g and returns the status.
func get(t testing.TB, srv *httptest.Server, g imagecache.Grant, d imagecache.Digest) int {
	t.Helper()
	resp, err := http.Get(srv.URL + g.Path(d))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A cache found on disk without verification stamps serves as soon as it opens: the site's
// kernel and initrd (Config.BootImages) are hashed first and served while the large images
// are still being hashed, and those are not served (404) until they were. Reopened, every
// image is served at once on its stamp, with nothing hashed.
func TestOpenServesWhileVerifying(t *testing.T) {
	dir := t.TempDir()
	big := sparseImages(t, dir, 4, 64<<20)
	kernel := writeImage(t, dir, randomBytes(940, 64<<10))
	initrd := writeImage(t, dir, randomBytes(941, 1<<20))
	cfg := fastConfig(t)
	cfg.Dir = dir
	cfg.Fence = imagecache.FenceFunc(func() (uint64, bool) { return 1, true })
	cfg.BootImages = []imagecache.Digest{kernel, initrd}
	start := time.Now()
	c := open(t, cfg)
	opened := time.Since(start)
	srv := httptest.NewServer(c)
	defer srv.Close()
	g, err := c.BootGrant(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the kernel served", func() bool { return get(t, srv, g, kernel) == http.StatusOK })
	firstServed := time.Since(start)
	waitFor(t, "the initrd served", func() bool { return get(t, srv, g, initrd) == http.StatusOK })
	var verifying []imagecache.Digest
	for _, d := range big {
		if _, ok := c.Lookup(d); !ok {
			verifying = append(verifying, d)
		}
	}
	if len(verifying) == 0 {
		t.Fatalf("every large image was verified before the kernel and initrd were served")
	}
	if code := get(t, srv, g, verifying[len(verifying)-1]); code != http.StatusNotFound {
		t.Errorf("an image not yet verified answered %d, want 404", code)
	}
	if err := c.WaitVerified(context.Background()); err != nil {
		t.Fatal(err)
	}
	all := time.Since(start)
	for _, d := range big {
		if code := get(t, srv, g, d); code != http.StatusOK {
			t.Errorf("a verified image answered %d", code)
		}
	}
	t.Logf("Open %v, kernel served after %v, all %d MiB verified after %v", opened, firstServed, 4*64+1, all)
	if s := c.Stats(); s.Reverified != 6 || s.StampMatched != 0 {
		t.Errorf("Reverified %d StampMatched %d, want 6 and 0", s.Reverified, s.StampMatched)
	}
	srv.Close()
	c.Close()

	c2 := open(t, cfg)
	if n := len(c2.Inventory()); n != 6 {
		t.Errorf("reopened: %d images served at once, want 6", n)
	}
	if s := c2.Stats(); s.StampMatched != 6 || s.Reverified != 0 {
		t.Errorf("reopened: StampMatched %d Reverified %d, want 6 and 0", s.StampMatched, s.Reverified)
	}
}

// A stamp is trusted only while the file is the one it describes: rewritten in place with
// its mtime put back (its ctime moved), touched, or replaced by a copy (a new inode), an
// image is hashed again before it is served, and removed when its bytes are wrong.
func TestStampMismatchReverifies(t *testing.T) {
	dir := t.TempDir()
	bodies := [][]byte{randomBytes(950, 5000), randomBytes(951, 5000), randomBytes(952, 5000), randomBytes(953, 5000)}
	var ds []imagecache.Digest
	for _, b := range bodies {
		ds = append(ds, writeImage(t, dir, b))
	}
	cfg := imagecache.Config{Dir: dir}
	c := open(t, cfg)
	c.WaitVerified(context.Background())
	c.Close()
	path := func(i int) string { return filepath.Join(dir, ds[i].String()) }
	fi, _ := os.Stat(path(0))
	mtime := fi.ModTime()
	// 0: one byte flipped in place, mtime put back.
	f, _ := os.OpenFile(path(0), os.O_RDWR, 0)
	f.WriteAt([]byte{bodies[0][10] ^ 1}, 10)
	f.Close()
	os.Chtimes(path(0), mtime, mtime)
	// 1: touched, bytes unchanged.
	later := mtime.Add(time.Hour)
	os.Chtimes(path(1), later, later)
	// 2: replaced by a copy of itself with the old mtime (a new inode).
	os.WriteFile(path(2)+".new", bodies[2], 0o600)
	os.Chtimes(path(2)+".new", mtime, mtime)
	os.Rename(path(2)+".new", path(2))
	// 3: left alone.

	c2 := open(t, cfg)
	if diff := cmp.Diff([]imagecache.Digest{ds[3]}, digests(c2.Inventory())); diff != "" {
		t.Errorf("served at Open on the stamp (-want +got):\n%s", diff)
	}
	c2.WaitVerified(context.Background())
	want := []imagecache.Digest{ds[1], ds[2], ds[3]}
	slices.SortFunc(want, func(a, b imagecache.Digest) int { return compareHex(a, b) })
	if diff := cmp.Diff(want, digests(c2.Inventory())); diff != "" {
		t.Errorf("served after verification (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(path(0)); !os.IsNotExist(err) {
		t.Errorf("the damaged image is still there: %v", err)
	}
	if s := c2.Stats(); s.StampMatched != 1 || s.Reverified != 2 || s.CorruptFilesRemoved != 1 {
		t.Errorf("StampMatched %d Reverified %d CorruptFilesRemoved %d, want 1 2 1", s.StampMatched, s.Reverified, s.CorruptFilesRemoved)
	}
}

func digests(items []imagecache.Item) []imagecache.Digest {
	var out []imagecache.Digest
	for _, it := range items {
		out = append(out, it.Digest)
	}
	return out
}

func compareHex(a, b imagecache.Digest) int {
	switch as, bs := a.String(), b.String(); {
	case as < bs:
		return -1
	case as > bs:
		return 1
	}
	return 0
}

// Open sweeps what crashed writes left: temp files of stamp and resume-record writes, an
// older version's random-named pull files, partial copies without a resume record, records
// and stamps of files that are gone. A partial copy with its record stays, to be resumed.
func TestOpenSweepsCrashedWrites(t *testing.T) {
	dir := t.TempDir()
	a := imagecache.Digest(sha256.Sum256([]byte("a")))
	b := imagecache.Digest(sha256.Sum256([]byte("b")))
	cd := imagecache.Digest(sha256.Sum256([]byte("c")))
	files := map[string]string{
		".tmp-.stamp-" + a.String() + "-123456":  "{",
		".tmp-.pull-" + b.String() + ".meta-987": "{",
		".pull-" + a.String() + "-42":            "partial",
		".pull-" + a.String():                    "no record",
		".pull-" + b.String():                    "partial b",
		".pull-" + b.String() + ".meta":          `{"url":"http://192.0.2.1/b","validator":{"etag":"\"x\""},"total":100}`,
		".pull-" + cd.String() + ".meta":         `{"url":"http://192.0.2.1/c","total":-1}`,
		".stamp-" + cd.String():                  "{}",
		"notes.txt":                              "the operator's",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := open(t, imagecache.Config{Dir: dir})
	want := []string{".pull-" + b.String(), ".pull-" + b.String() + ".meta", "notes.txt"}
	var got []string
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if de.Name() != ".lock" {
			got = append(got, de.Name())
		}
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files after Open (-want +got):\n%s", diff)
	}
	if s := c.Stats(); s.TempFilesRemoved != 6 {
		t.Errorf("TempFilesRemoved %d, want 6", s.TempFilesRemoved)
	}
}
