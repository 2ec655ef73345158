package atomicfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
