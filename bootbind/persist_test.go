package bootbind_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
)

const goodNonce = "0123456789abcdef0123456789abcdef"

// savedDoc is a saved document of the given entries (JSON objects), issued at t0.
func savedDoc(entries ...string) string {
	return `{"version":1,"nonces":[` + strings.Join(entries, ",") + `]}`
}

func savedEntry(nonce string, m hwid.MAC, issued time.Time) string {
	return fmt.Sprintf(`{"nonce":%q,"kind":0,"mac":%q,"issued":%q,"owner":"192.0.2.10"}`, nonce, m, issued.Format(time.RFC3339Nano))
}

// TestSaveFileLoadFile: the nonces a store saves come back in a new store on the same
// clock, each bound to its address and within its original window; lapsed ones stay out.
func TestSaveFileLoadFile(t *testing.T) {
	clk := clocktest.New(t0)
	path := filepath.Join(t.TempDir(), "boot-nonces.json")
	cfg := bootbind.Config{Clock: clk, Window: time.Minute}
	s := bootbind.NewNonces(cfg)
	old, _ := s.Issue(mac, bootbind.KindChain, machine)
	clk.Advance(40 * time.Second)
	fresh, _ := s.Issue(other, bootbind.KindChain, machine)
	if err := s.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved file: %v, %v; want mode 0600", fi, err)
	}

	for _, tc := range []struct {
		name      string
		advance   time.Duration
		wantKept  int
		wantOld   bootbind.Reason
		wantFresh bootbind.Reason
	}{
		{"at once", 0, 2, bootbind.Bound, bootbind.Bound},
		{"the first lapsed", 20 * time.Second, 1, bootbind.UnknownNonce, bootbind.Bound},
		{"both lapsed", 60 * time.Second, 0, bootbind.UnknownNonce, bootbind.UnknownNonce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New(clk.Now().Add(tc.advance))
			r := bootbind.NewNonces(bootbind.Config{Clock: clk, Window: time.Minute})
			kept, err := r.LoadFile(path)
			if err != nil || kept != tc.wantKept || r.Len() != tc.wantKept {
				t.Fatalf("LoadFile: kept %d (holds %d), %v; want %d", kept, r.Len(), err, tc.wantKept)
			}
			if got := r.Claim(old, mac, machine); got != tc.wantOld {
				t.Errorf("the older nonce: %s, want %s", got, tc.wantOld)
			}
			if got := r.Claim(fresh, other, thief); tc.wantFresh == bootbind.Bound && got != bootbind.OtherAddress {
				t.Errorf("the newer nonce from another address: %s, want nonce-other-address", got)
			}
			if got := r.Claim(fresh, other, machine); got != tc.wantFresh {
				t.Errorf("the newer nonce: %s, want %s", got, tc.wantFresh)
			}
		})
	}
}

// TestLoadFileMissing: no file is a first start, not an error, and creates nothing.
func TestLoadFileMissing(t *testing.T) {
	dir := t.TempDir()
	s := bootbind.NewNonces(bootbind.Config{Clock: clocktest.New(t0)})
	if n, err := s.LoadFile(filepath.Join(dir, "boot-nonces.json")); n != 0 || err != nil {
		t.Fatalf("LoadFile of no file: %d, %v", n, err)
	}
	if n, err := s.LoadFile(filepath.Join(dir, "no", "such", "dir", "boot-nonces.json")); n != 0 || err != nil {
		t.Fatalf("LoadFile in no directory: %d, %v", n, err)
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Fatalf("LoadFile created %v", des)
	}
}

// TestLoadFileDamaged: a damaged file loads what parsed, is set aside byte for byte, and
// says so with a *DamagedError; the store's own nonces stay, and the next SaveFile starts
// a new file.
func TestLoadFileDamaged(t *testing.T) {
	good := savedEntry(goodNonce, mac, t0)
	for _, tc := range []struct {
		name     string
		data     string
		wantKept int
		wantLost int
	}{
		{"not JSON", "{", 0, -1},
		{"truncated", savedDoc(good)[:40], 0, -1},
		{"another version", `{"version":2,"nonces":[]}`, 0, -1},
		{"no version", `{"nonces":[]}`, 0, -1},
		{"null", `null`, 0, -1},
		{"too large", savedDoc(good) + strings.Repeat(" ", bootbind.MaxSavedBytes), 0, -1},
		{"an entry of the wrong type", savedDoc(good, `{"nonce":"ffffffffffffffffffffffffffffffff","kind":"x","mac":"52:54:00:00:00:03","issued":"2026-12-01T10:00:00Z"}`), 1, 1},
		{"a bad MAC", savedDoc(`{"nonce":"ffffffffffffffffffffffffffffffff","kind":0,"mac":"zz","issued":"2026-12-01T10:00:00Z"}`, good), 1, 1},
		{"a bad token", savedDoc(good, savedEntry("../../etc/passwd", other, t0)), 1, 1},
		{"a kind out of range", savedDoc(good, `{"nonce":"ffffffffffffffffffffffffffffffff","kind":9,"mac":"52:54:00:00:00:02","issued":"2026-12-01T10:00:00Z"}`), 1, 1},
		{"a zero MAC", savedDoc(good, savedEntry("ffffffffffffffffffffffffffffffff", hwid.MAC{}, t0)), 1, 1},
		{"an entry that is not an object", savedDoc(good, `7`, `null`), 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New(t0.Add(time.Second))
			dir := t.TempDir()
			path := filepath.Join(dir, "boot-nonces.json")
			if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			s := bootbind.NewNonces(bootbind.Config{Clock: clk})
			mine, _ := s.Issue(other, bootbind.KindChain, machine)

			kept, err := s.LoadFile(path)
			var d *bootbind.DamagedError
			if !errors.As(err, &d) || !errors.Is(err, bootbind.ErrDamaged) {
				t.Fatalf("LoadFile: %v, want a *DamagedError", err)
			}
			if kept != tc.wantKept || d.Kept != tc.wantKept || d.Lost != tc.wantLost || d.Path != path || d.Err == nil {
				t.Errorf("kept %d, damage %+v; want kept %d, lost %d", kept, d, tc.wantKept, tc.wantLost)
			}
			if want := "boot-nonces.json" + bootbind.SetAsideInfix + "20261201T100001.000000000Z"; d.SetAside != want {
				t.Errorf("set aside as %q, want %q (the store's clock)", d.SetAside, want)
			}
			if b, err := os.ReadFile(filepath.Join(dir, d.SetAside)); err != nil || !bytes.Equal(b, []byte(tc.data)) {
				t.Errorf("the set-aside file: %v; holds the damaged bytes: %v", err, bytes.Equal(b, []byte(tc.data)))
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the damaged file is still at its name: %v", err)
			}
			if !s.Live(mine, bootbind.KindChain) || s.Len() != 1+tc.wantKept {
				t.Errorf("the store holds %d nonces (its own live: %v), want its own and %d loaded", s.Len(), s.Live(mine, bootbind.KindChain), tc.wantKept)
			}
			if tc.wantKept > 0 && !s.Live(goodNonce, bootbind.KindChain) {
				t.Error("the entry that parsed was not loaded")
			}
			if err := s.SaveFile(path); err != nil {
				t.Fatal(err)
			}
			r := bootbind.NewNonces(bootbind.Config{Clock: clk})
			if n, err := r.LoadFile(path); err != nil || n != s.Len() {
				t.Errorf("the new file: kept %d, %v; want %d", n, err, s.Len())
			}
			// A second damage at the same instant gets a name of its own.
			os.WriteFile(path, []byte("{"), 0o600)
			if _, err := s.LoadFile(path); !errors.As(err, &d) || d.SetAside != "boot-nonces.json"+bootbind.SetAsideInfix+"20261201T100001.000000000Z-1" {
				t.Errorf("second damage: %v", err)
			}
		})
	}
}

// TestSaveFileOnlyWhenChanged: SaveFile writes when the store changed, or to a file it did
// not save last; a failed write is tried again by the next SaveFile.
func TestSaveFileOnlyWhenChanged(t *testing.T) {
	clk := clocktest.New(t0)
	dir := t.TempDir()
	path := filepath.Join(dir, "boot-nonces.json")
	s := bootbind.NewNonces(bootbind.Config{Clock: clk})
	s.Issue(mac, bootbind.KindChain, machine)
	if err := s.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, []byte("marker"), 0o600)
	if err := s.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "marker" {
		t.Error("SaveFile with nothing changed wrote the file")
	}
	second := filepath.Join(dir, "second.json")
	if err := s.SaveFile(second); err != nil {
		t.Fatal(err)
	}
	if n, err := bootbind.NewNonces(bootbind.Config{Clock: clk}).LoadFile(second); n != 1 || err != nil {
		t.Errorf("SaveFile to another file with nothing changed: loads %d, %v", n, err)
	}
	s.Issue(mac, bootbind.KindChain, machine)
	if err := s.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	if n, err := bootbind.NewNonces(bootbind.Config{Clock: clk}).LoadFile(path); n != 2 || err != nil {
		t.Errorf("after a new nonce: loads %d, %v; want 2", n, err)
	}

	// A write that fails (no directory yet) leaves the change to save.
	later := filepath.Join(dir, "later", "boot-nonces.json")
	if err := s.SaveFile(later); err == nil {
		t.Fatal("SaveFile into no directory succeeded")
	}
	os.Mkdir(filepath.Dir(later), 0o700)
	if err := s.SaveFile(later); err != nil {
		t.Fatal(err)
	}
	if n, err := bootbind.NewNonces(bootbind.Config{Clock: clk}).LoadFile(later); n != 2 || err != nil {
		t.Errorf("after a failed write: loads %d, %v; want 2", n, err)
	}
}

// TestLoadFileSweepsTemporaries: the temporary files of an interrupted SaveFile are
// removed; other files are not.
func TestLoadFileSweepsTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "boot-nonces.json")
	leftover := filepath.Join(dir, ".tmp-boot-nonces.json-12345")
	keep := filepath.Join(dir, ".tmp-other.json-12345")
	for _, p := range []string{leftover, keep} {
		os.WriteFile(p, []byte("{"), 0o600)
	}
	if _, err := bootbind.NewNonces(bootbind.Config{Clock: clocktest.New(t0)}).LoadFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the interrupted write's temporary file is still there: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("another file's temporary file was removed: %v", err)
	}
}

// TestLoadFileBounded: a file of more live nonces than the store holds keeps the newest,
// within Config.Max and MaxNoncesPerMAC.
func TestLoadFileBounded(t *testing.T) {
	var entries []string
	for i := range 40 {
		m := hwid.MAC{0x52, 0x54, 0, 0, byte(i / 8), byte(i)}
		entries = append(entries, savedEntry(fmt.Sprintf("%032x", i+1), m, t0.Add(time.Duration(i)*time.Second)))
	}
	path := filepath.Join(t.TempDir(), "boot-nonces.json")
	os.WriteFile(path, []byte(savedDoc(entries...)), 0o600)
	s := bootbind.NewNonces(bootbind.Config{Clock: clocktest.New(t0.Add(time.Minute)), Max: 10})
	n, err := s.LoadFile(path)
	if err != nil || n != 10 || s.Len() != 10 {
		t.Fatalf("LoadFile: kept %d (holds %d), %v; want 10", n, s.Len(), err)
	}
	for i := range 40 {
		if live, want := s.Live(fmt.Sprintf("%032x", i+1), bootbind.KindChain), i >= 30; live != want {
			t.Errorf("nonce %d live %v, want %v (the newest ten)", i, live, want)
		}
	}
}

// TestSaveFileTooLarge: a store whose document would pass MaxSavedBytes is not written (a
// LoadFile would refuse it), and says so.
func TestSaveFileTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("mints 32768 nonces")
	}
	const n = 32 << 10
	s := bootbind.NewNonces(bootbind.Config{Clock: clocktest.New(t0), Max: n})
	for i := range n {
		s.Issue(hwid.MAC{0x52, 0x54, 0, byte(i >> 16), byte(i >> 8), byte(i)}, bootbind.KindChain, machine)
	}
	path := filepath.Join(t.TempDir(), "boot-nonces.json")
	if err := s.SaveFile(path); !errors.Is(err, bootbind.ErrTooLarge) {
		t.Fatalf("SaveFile of %d nonces: %v, want ErrTooLarge", n, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was written: %v", err)
	}
}

// TestSaveFileConcurrent: saves racing with issues never lose the last state (run with
// -race).
func TestSaveFileConcurrent(t *testing.T) {
	clk := clocktest.New(t0)
	path := filepath.Join(t.TempDir(), "boot-nonces.json")
	s := bootbind.NewNonces(bootbind.Config{Clock: clk})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20 {
				s.Issue(hwid.MAC{0x52, 0x54, 0, 0, byte(g), byte(i)}, bootbind.KindChain, machine)
				if err := s.SaveFile(path); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := s.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	if n, err := bootbind.NewNonces(bootbind.Config{Clock: clk}).LoadFile(path); n != 80 || err != nil {
		t.Fatalf("LoadFile: %d, %v; want 80", n, err)
	}
}
