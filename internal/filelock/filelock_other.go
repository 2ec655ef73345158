//go:build !unix && !windows

package filelock

import (
	"errors"
	"fmt"
	"os"
)

// TryLock is not supported on this system: it returns an error wrapping
// errors.ErrUnsupported.
func TryLock(f *os.File) error {
	return fmt.Errorf("filelock: lock %s: %w", f.Name(), errors.ErrUnsupported)
}
