// Package filelock takes an exclusive, advisory lock on an open file without waiting, so
// that one process at a time owns a directory (the image cache's, the BMC journal's). The
// lock is the process's for as long as the file stays open; closing it, or the process
// ending, releases it.
//
// # Systems
//
// On Unix systems (Linux, the BSDs, macOS) the lock is flock(2); on Windows, LockFileEx on
// the file's first byte. Elsewhere TryLock returns an error wrapping errors.ErrUnsupported.
package filelock

import "errors"

// ErrLocked is what TryLock returns (wrapped) when another open file holds the lock.
var ErrLocked = errors.New("filelock: locked by another process")
