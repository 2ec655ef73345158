//go:build unix

package filelock

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// TryLock takes an exclusive lock on f, or returns an error wrapping ErrLocked when another
// open file holds it.
func TryLock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return fmt.Errorf("%w: %w", ErrLocked, err)
	}
	return fmt.Errorf("filelock: flock %s: %w", f.Name(), err)
}
