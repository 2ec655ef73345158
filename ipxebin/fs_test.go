package ipxebin_test

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"testing"

	"github.com/bettercompute/siteboot/ipxebin"
)

// TestFS: each open trusts the CA of that moment, the BIOS build too (repacked, so its
// size is the repacked image's); an error from CA fails the open.
func TestFS(t *testing.T) {
	ca1, ca2 := newCA(t, "first CA"), newCA(t, "second CA")
	var ca *x509.Certificate
	var caErr error
	fsys := ipxebin.FS{CA: func() (*x509.Certificate, error) { return ca, caErr }}

	read := func(name string) ([]byte, error) {
		f, err := fsys.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(f)
		if err == nil && int64(len(b)) != st.Size() {
			t.Errorf("%s: read %d bytes, Stat says %d", name, len(b), st.Size())
		}
		return b, err
	}
	asBuilt, err := fs.ReadFile(ipxebin.Embedded(), ipxebin.SnponlyX8664)
	if err != nil {
		t.Fatal(err)
	}
	b, err := read(ipxebin.SnponlyX8664)
	if err != nil || !bytes.Equal(b, asBuilt) {
		t.Errorf("without a CA: %d bytes, %v; want the build as it is", len(b), err)
	}
	for _, c := range []*x509.Certificate{ca1, ca2} {
		ca = c
		fp := sha256.Sum256(c.Raw)
		b, err := read(ipxebin.SnponlyX8664)
		if err != nil || !bytes.Contains(b, fp[:]) || bytes.Contains(b, ipxebin.PlaceholderFingerprint[:]) {
			t.Errorf("CA %s: %v; want the binary trusting it instead of the placeholder", c.Subject.CommonName, err)
		}
	}
	kpxe, err := fs.ReadFile(ipxebin.Embedded(), ipxebin.UndionlyKPXE)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ipxebin.WithTrust(kpxe, ca)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := read(ipxebin.UndionlyKPXE); err != nil || !bytes.Equal(b, want) || bytes.Equal(b, kpxe) {
		t.Errorf("BIOS build with a CA: %d bytes, %v; want it repacked to trust the CA", len(b), err)
	}
	if _, err := read("missing.efi"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing build: %v, want fs.ErrNotExist", err)
	}
	caErr = errors.New("no root")
	if _, err := read(ipxebin.SnponlyX8664); !errors.Is(err, caErr) {
		t.Errorf("CA error: %v, want it wrapped", err)
	}
}
