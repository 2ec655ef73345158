package sitetls

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// MaxFileBytes bounds each file this package reads.
const MaxFileBytes = 1 << 20

// version is what a file's metadata says about its content: a change of any field means
// the file was rewritten, replaced (a rename brings a new inode) or re-linked.
type version struct {
	dev, ino uint64
	size     int64
	mtime    int64 // Unix nanoseconds
	ctime    int64
	mode     fs.FileMode
}

func versionOf(fi fs.FileInfo) version {
	v := version{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
	v.dev, v.ino, v.ctime = fileID(fi)
	return v
}

// statVersion returns the current version of path (following symlinks, as a rotated
// Kubernetes secret volume needs).
func statVersion(path string) (version, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return version{}, err
	}
	return versionOf(fi), nil
}

// readFile reads path after checking, on the opened file, that it is a regular file no
// larger than MaxFileBytes whose mode has none of the bits in forbidden. It returns the
// version of what it read.
func readFile(role, path string, forbidden fs.FileMode) ([]byte, version, error) {
	fail := func(err error) ([]byte, version, error) {
		return nil, version{}, &FileError{Role: role, Path: path, Err: err}
	}
	// Stat first so that a pipe or device is refused before open could block on it.
	fi, err := os.Stat(path)
	if err != nil {
		return fail(err)
	}
	if !fi.Mode().IsRegular() {
		return fail(ErrNotRegular)
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	fi, err = f.Stat()
	if err != nil {
		return fail(err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return fail(ErrNotRegular)
	case fi.Mode().Perm()&forbidden != 0:
		return fail(fmt.Errorf("%w (mode %#o)", ErrInsecureFile, fi.Mode().Perm()))
	case fi.Size() > MaxFileBytes:
		return fail(fmt.Errorf("%w (%d bytes, at most %d)", ErrTooLarge, fi.Size(), MaxFileBytes))
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return fail(err)
	}
	if len(b) > MaxFileBytes {
		return fail(fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, MaxFileBytes))
	}
	return b, versionOf(fi), nil
}
