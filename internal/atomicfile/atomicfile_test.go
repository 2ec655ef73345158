package atomicfile_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/internal/atomicfile"
)

func TestWriteReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "entries.json")
	for _, content := range []string{"first", "second, longer"} {
		if err := atomicfile.Write(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if strings.HasPrefix(n.Name(), atomicfile.TempPrefix) {
			t.Errorf("temporary file left behind: %s", n.Name())
		}
	}
}

func TestWriteFailureKeepsOldContent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := atomicfile.Write(p, []byte("good"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory in the way of the rename: the write fails and the old file stays.
	if err := atomicfile.Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	got, _ := os.ReadFile(p)
	if string(got) != "good" {
		t.Errorf("content = %q", got)
	}
}

// Sweep removes what interrupted Writes of one path left (".tmp-NAME-DIGITS"), and only
// that: another file's temporaries, look-alikes, directories and the file itself stay.
// SweepDir removes every Write temporary of a directory.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "boot-entries.json")
	if err := atomicfile.Write(p, []byte("entries"), 0o600); err != nil {
		t.Fatal(err)
	}
	// What a crash during Write leaves: os.CreateTemp's own name pattern.
	var crashed []string
	for range 3 {
		f, err := os.CreateTemp(dir, atomicfile.TempPrefix+"boot-entries.json-*")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("half an entries file")
		f.Close()
		crashed = append(crashed, filepath.Base(f.Name()))
	}
	keep := []string{
		"boot-entries.json",
		".tmp-boot-entries.json-abc",    // not Write's pattern
		".tmp-boot-entries.json.bak-12", // another file's temporary
		".tmp-key.pem-77",               // another file's temporary
		"notes-.tmp-boot-entries.json-1",
	}
	for _, name := range keep[1:] {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ".tmp-boot-entries.json-5"), 0o700); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, ".tmp-boot-entries.json-5")

	removed, err := atomicfile.Sweep(p)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	slices.Sort(crashed)
	if diff := cmp.Diff(crashed, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	left := names(t, dir)
	slices.Sort(keep)
	if diff := cmp.Diff(keep, left); diff != "" {
		t.Errorf("left (-want +got):\n%s", diff)
	}
	if got, _ := os.ReadFile(p); string(got) != "entries" {
		t.Errorf("the file itself: %q", got)
	}
	// Nothing left to sweep: no error, nothing removed.
	if removed, err := atomicfile.Sweep(p); err != nil || len(removed) != 0 {
		t.Errorf("second Sweep = %v, %v", removed, err)
	}

	removed, err = atomicfile.SweepDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if diff := cmp.Diff([]string{".tmp-boot-entries.json.bak-12", ".tmp-key.pem-77"}, removed); diff != "" {
		t.Errorf("SweepDir removed (-want +got):\n%s", diff)
	}
	if _, err := atomicfile.Sweep(filepath.Join(dir, "missing", "f")); err == nil {
		t.Errorf("Sweep in a missing directory: no error")
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	slices.Sort(out)
	return out
}
