package ipxebin

import (
	"bytes"
	"crypto/x509"
	"io/fs"
	"path"
	"time"
)

// FS serves the builds as a file system (a TFTP server's or the HTTP boot files'): each
// file opened is [Builds.ReadFile]'s, trusting the CA that CA returns at that moment, so a
// site CA that changes is trusted from the next open on. A build that cannot be made to
// trust it (undionly.kpxe) fails to open with an error wrapping [ErrNoTrustArea].
type FS struct {
	// FS holds the binaries by name. Nil means [Embedded].
	FS fs.FS
	// CA returns the root every binary opened trusts; nil, or a nil certificate with a
	// nil error, hands binaries out as they are. An error fails the open.
	CA func() (*x509.Certificate, error)
	// ModTime is the files' modification time. Zero: the zero time.
	ModTime time.Time
}

// Open opens the binary called name, patched.
func (f FS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	b := Builds{FS: f.FS}
	if f.CA != nil {
		ca, err := f.CA()
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: &Error{Op: "trust", Name: name, Err: err}}
		}
		b.CA = ca
	}
	if name == "." {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	bin, err := b.ReadFile(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &file{Reader: bytes.NewReader(bin), info: info{name: path.Base(name), size: int64(len(bin)), mod: f.ModTime}}, nil
}

// file is a patched binary in memory: it reads, seeks and reads at an offset (TFTP's
// blocks, HTTP's ranges).
type file struct {
	*bytes.Reader
	info info
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *file) Close() error               { return nil }

type info struct {
	name string
	size int64
	mod  time.Time
}

func (i info) Name() string       { return i.name }
func (i info) Size() int64        { return i.size }
func (i info) Mode() fs.FileMode  { return 0o444 }
func (i info) ModTime() time.Time { return i.mod }
func (i info) IsDir() bool        { return false }
func (i info) Sys() any           { return nil }
