package filelock_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/bettercompute/siteboot/internal/filelock"
)

// A second open file cannot take the lock while the first holds it, and can once the first
// is closed.
func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	first := open()
	if err := filelock.TryLock(first); err != nil {
		t.Fatalf("first TryLock: %v", err)
	}
	second := open()
	if err := filelock.TryLock(second); !errors.Is(err, filelock.ErrLocked) {
		t.Fatalf("second TryLock while the first holds the lock: %v, want ErrLocked", err)
	}
	first.Close()
	if err := filelock.TryLock(second); err != nil {
		t.Fatalf("second TryLock after the first closed: %v", err)
	}
}
