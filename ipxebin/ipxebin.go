package ipxebin

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"embed"
	"encoding/hex"
	"io/fs"
)

// Names of the builds in [Embedded] and in a site's [Builds.FS].
const (
	UndionlyKPXE = "undionly.kpxe"      // BIOS PXE
	SnponlyX8664 = "snponly-x86_64.efi" // x86-64 UEFI, firmware network stack
	IPXEX8664    = "ipxe-x86_64.efi"    // x86-64 UEFI, iPXE's native drivers
	SnponlyARM64 = "snponly-arm64.efi"  // arm64 UEFI, firmware network stack
)

//go:embed bin/undionly.kpxe bin/snponly-x86_64.efi bin/ipxe-x86_64.efi bin/snponly-arm64.efi
var embedded embed.FS

// Embedded returns siteboot's own builds, named as the constants above.
func Embedded() fs.FS {
	sub, err := fs.Sub(embedded, "bin")
	if err != nil {
		panic(err) // "bin" is a valid path; fs.Sub fails only on invalid ones
	}
	return sub
}

// PlaceholderFingerprint is the SHA-256 fingerprint of the only root the builds trust as
// built; its private key does not exist. [WithTrust] replaces it.
var PlaceholderFingerprint = mustHex("f007ded58b7af4d0ec74a448cc10ab274096bcec6ec58e968729218e0abbabfc")

func mustHex(s string) [sha256.Size]byte {
	var fp [sha256.Size]byte
	if n, err := hex.Decode(fp[:], []byte(s)); err != nil || n != len(fp) {
		panic("ipxebin: bad placeholder fingerprint")
	}
	return fp
}

// WithTrust returns a copy of bin, an iPXE binary built with the placeholder root, that trusts
// ca instead. An EFI build holds the placeholder's fingerprint as it is, and only those 32
// bytes change. A compressed BIOS image (undionly.kpxe) holds it in its last packed block:
// WithTrust unpacks that block, replaces the fingerprint and packs it again (see the package
// doc), so the image's length changes. It fails with [ErrNoTrustArea] when bin holds no
// placeholder (a build of the site's own), [ErrManyTrustAreas] when it holds more than one,
// and [ErrImageLayout] for a compressed image it cannot repack.
func WithTrust(bin []byte, ca *x509.Certificate) ([]byte, error) {
	if ca == nil {
		return nil, ErrNoCA
	}
	fp := sha256.Sum256(ca.Raw)
	ph := PlaceholderFingerprint[:]
	i := bytes.Index(bin, ph)
	if i < 0 {
		out, err := withTrustZbinCached(bin, fp)
		if err != nil {
			return nil, err
		}
		return bytes.Clone(out), nil
	}
	if bytes.Contains(bin[i+1:], ph) {
		return nil, ErrManyTrustAreas
	}
	out := bytes.Clone(bin)
	copy(out[i:], fp[:])
	return out, nil
}

// Builds hands out iPXE binaries, patched to trust the site CA.
type Builds struct {
	// FS holds the binaries by name. Nil means [Embedded].
	FS fs.FS
	// CA is the root every binary handed out trusts. Nil hands binaries out as they are.
	CA *x509.Certificate
}

// ReadFile returns the binary called name, trusting b.CA when it is set. A binary that cannot
// be made to trust b.CA is an error wrapping [ErrNoTrustArea], [ErrManyTrustAreas] or
// [ErrImageLayout], never served as it is.
func (b *Builds) ReadFile(name string) ([]byte, error) {
	fsys := b.FS
	if fsys == nil {
		fsys = Embedded()
	}
	bin, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, &Error{Op: "read", Name: name, Err: err}
	}
	if b.CA == nil {
		return bin, nil
	}
	out, err := WithTrust(bin, b.CA)
	if err != nil {
		return nil, &Error{Op: "trust", Name: name, Err: err}
	}
	return out, nil
}
