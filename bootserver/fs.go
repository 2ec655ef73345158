package bootserver

import (
	"io/fs"
	"net/netip"
	"strings"

	"github.com/bettercompute/siteboot/tftpd"
)

// GrantDir is the directory of the TFTP file system under which cached images are
// served under a grant: t/GRANT/SHA256, the path imagecache serves under /cache/.
const GrantDir = "t"

// FS is the file system a boot server's TFTP serves: the iPXE builds at its root, cached
// images under a grant as t/GRANT/SHA256, and other loaders' files each under a directory
// of their own. It is a tftpd.PeerFS: a mount that is one (a file served only to the
// address it was handed to) is asked with the requester's address.
type FS struct {
	// Builds are the iPXE builds (undionly.kpxe, ipxe.efi, ...) at the root, with their
	// subdirectories but for one named GrantDir or a mount's name, which those shadow.
	// Nil: none.
	Builds fs.FS
	// Grants serves t/GRANT/SHA256: an image cache's GrantFS. Nil: none.
	Grants fs.FS
	// Mounts are other file systems by the top directory they are served under
	// ("grub" serves grub/x.cfg as x.cfg of its FS). A name is one path element, and
	// not GrantDir. Nil: none.
	Mounts map[string]fs.FS
}

var _ tftpd.PeerFS = FS{}

// route is the file system name is served from, and its name there.
func (f FS) route(name string) (fs.FS, string) {
	dir, rest, ok := strings.Cut(name, "/")
	switch {
	case !ok:
		return f.Builds, name
	case dir == GrantDir:
		return f.Grants, name
	}
	if m := f.Mounts[dir]; m != nil {
		return m, rest
	}
	return f.Builds, name // a directory of the builds (efi64/ipxe.efi, say)
}

// Open opens name from the file system that serves it.
func (f FS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	sub, n := f.route(name)
	if sub == nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return sub.Open(n)
}

// OpenFrom opens name for peer: with OpenFrom when the file system that serves it is a
// tftpd.PeerFS, else with Open.
func (f FS) OpenFrom(name string, peer netip.AddrPort) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	sub, n := f.route(name)
	if p, ok := sub.(tftpd.PeerFS); ok {
		return p.OpenFrom(n, peer)
	}
	return f.Open(name)
}

// validate checks the mounts' names.
func (f FS) validate() error {
	for dir, m := range f.Mounts {
		if dir == "" || dir == "." || dir == ".." || dir == GrantDir || strings.Contains(dir, "/") || m == nil {
			return errInvalid("FS.Mounts[%q]: a mount is one directory name other than %q, with a file system", dir, GrantDir)
		}
	}
	return nil
}
