package imagecache

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"
)

// File is a cached image opened under a grant ([Cache.OpenGranted]): read-only, of a known
// size, and kept in the cache (never trimmed) until it is closed. It is an fs.File, an
// io.ReadSeeker and an io.ReaderAt, so tftpd, http.ServeContent or any reader can send it.
type File struct {
	f    *os.File
	d    Digest
	size int64
	c    *Cache
	e    *entry
	once sync.Once
}

var _ fs.File = (*File)(nil)

// Read reads the image's next bytes.
func (f *File) Read(p []byte) (int, error) { return f.f.Read(p) }

// ReadAt reads the image's bytes at off.
func (f *File) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

// Seek sets where the next Read reads.
func (f *File) Seek(offset int64, whence int) (int64, error) { return f.f.Seek(offset, whence) }

// Stat describes the image's file: a regular file named by its digest, of Size bytes.
func (f *File) Stat() (fs.FileInfo, error) { return f.f.Stat() }

// Size is the image's length in bytes.
func (f *File) Size() int64 { return f.size }

// Digest is the image's SHA-256.
func (f *File) Digest() Digest { return f.d }

// SyscallConn gives the file's descriptor to a sender that reads by descriptor (tftpd's
// preadv(2) and shared mapping, sendfile(2)); the descriptor is read-only.
func (f *File) SyscallConn() (syscall.RawConn, error) { return f.f.SyscallConn() }

// Close closes the file and lets the cache trim the image again. Later calls return nil.
func (f *File) Close() error {
	var err error
	f.once.Do(func() {
		err = f.f.Close()
		f.c.mu.Lock()
		f.e.inUse--
		f.c.mu.Unlock()
	})
	return err
}

// OpenGranted opens the cached image d for the holder of the grant token (32 lower-case
// hex digits, as in /cache/t/TOKEN/SHA256), under the rules ServeHTTP applies: the token is
// compared in constant time; an unknown or expired grant, a grant for another digest and an
// image that is not cached are refused, and so is a boot grant while the Fence is
// inactive. A refusal is a [*GrantError] saying why (it never holds the token), counted in
// Stats as ServeHTTP's are; an image opened counts as Served. The caller closes the File.
func (c *Cache) OpenGranted(ctx context.Context, token string, d Digest) (*File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var tok [TokenLen / 2]byte
	if !parseLowerHex(tok[:], token) {
		return nil, c.refused(&c.stats.refusedPath, RefusedMalformed, Digest{})
	}
	return c.openGranted(&tok, d)
}

// openGranted applies the grant rules to tok and d and opens the image.
func (c *Cache) openGranted(tok *[TokenLen / 2]byte, d Digest) (*File, error) {
	switch c.checkGrant(tok, d) {
	case verdictUnknown:
		return nil, c.refused(&c.stats.refusedGrant, RefusedUnknownGrant, d)
	case verdictExpired:
		return nil, c.refused(&c.stats.refusedExpired, RefusedExpired, d)
	case verdictOtherDigest:
		return nil, c.refused(&c.stats.refusedDigest, RefusedOtherDigest, d)
	case verdictFenced:
		return nil, c.refused(&c.stats.refusedFenced, RefusedFenced, d)
	}

	now := c.now()
	c.mu.Lock()
	e := c.entries[d]
	if e == nil {
		c.mu.Unlock()
		return nil, c.refused(&c.stats.refusedMissing, RefusedNotCached, d)
	}
	e.inUse++
	e.lastUsed = now
	size := e.size
	persist := now.Sub(e.persisted) >= persistEvery
	if persist {
		e.persisted = now
	}
	c.mu.Unlock()

	path := c.path(d)
	f, err := os.Open(path)
	if err != nil {
		c.log.Warn("imagecache: a cached image cannot be opened", "sha256", d.String(), "err", err)
		c.mu.Lock()
		e.inUse--
		if errors.Is(err, fs.ErrNotExist) && c.entries[d] == e {
			// Removed behind the cache's back: forget it, so that a pin pulls it again.
			c.forgetLocked(d)
		}
		c.mu.Unlock()
		return nil, c.refused(&c.stats.refusedMissing, RefusedNotCached, d)
	}
	if persist {
		// The new mtime changes the file's identity: its stamp follows (a crash between
		// the two costs one hash of the image at the next start).
		if err := os.Chtimes(path, time.Time{}, now); err == nil {
			if err := c.writeStamp(d); err != nil {
				c.log.Warn("imagecache: stamp not written", "sha256", d.String(), "err", err)
			}
		}
	}
	c.stats.served.Add(1)
	return &File{f: f, d: d, size: size, c: c, e: e}, nil
}

func (c *Cache) refused(counter interface{ Add(int64) int64 }, r Refusal, d Digest) error {
	counter.Add(1)
	return &GrantError{Reason: r, Digest: d}
}

// GrantFS returns the cache as an fs.FS of the names "t/TOKEN/SHA256" (the path
// ServeHTTP serves under /cache/), each opened with [Cache.OpenGranted]: what tftpd.Server's
// FS takes, so that a host serves cached images over TFTP under the same grants as over
// HTTP. Mount it under a prefix by trimming the prefix before Open. A refusal is an
// *fs.PathError wrapping the [*GrantError], which reads as fs.ErrNotExist (tftpd: "file not
// found"), or fs.ErrPermission while fenced (tftpd: "access violation").
func (c *Cache) GrantFS() fs.FS { return grantFS{c} }

type grantFS struct{ c *Cache }

// Open opens "t/TOKEN/SHA256".
func (g grantFS) Open(name string) (fs.File, error) {
	f, err := g.open(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return f, nil
}

func (g grantFS) open(name string) (*File, error) {
	tok, d, ok := parseName(name)
	if !ok {
		return nil, g.c.refused(&g.c.stats.refusedPath, RefusedMalformed, Digest{})
	}
	return g.c.openGranted(&tok, d)
}
