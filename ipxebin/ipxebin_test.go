package ipxebin_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io/fs"
	"math/big"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/ipxebin"
)

func newCA(t *testing.T, name string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// The EFI builds carry the placeholder root exactly once, uncompressed, and WithTrust swaps it
// for the CA's fingerprint and changes nothing else.
func TestEmbeddedEFITrustPatch(t *testing.T) {
	ca := newCA(t, "site CA")
	fp := sha256.Sum256(ca.Raw)
	for _, name := range []string{ipxebin.SnponlyX8664, ipxebin.IPXEX8664, ipxebin.SnponlyARM64} {
		t.Run(name, func(t *testing.T) {
			bin, err := fs.ReadFile(ipxebin.Embedded(), name)
			if err != nil {
				t.Fatal(err)
			}
			ph := ipxebin.PlaceholderFingerprint[:]
			if n := bytes.Count(bin, ph); n != 1 {
				t.Fatalf("placeholder occurs %d times, want 1", n)
			}
			i := bytes.Index(bin, ph)
			out, err := ipxebin.WithTrust(bin, ca)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(bin) {
				t.Fatalf("length %d, want %d", len(out), len(bin))
			}
			if !bytes.Equal(out[i:i+len(fp)], fp[:]) {
				t.Errorf("trust area holds %x, want %x", out[i:i+len(fp)], fp)
			}
			if !bytes.Equal(out[:i], bin[:i]) || !bytes.Equal(out[i+len(fp):], bin[i+len(fp):]) {
				t.Error("bytes outside the trust area changed")
			}
			if !bytes.Equal(bin[i:i+len(ph)], ph) {
				t.Error("WithTrust modified its input")
			}
		})
	}
}

// The BIOS build is compressed: a Builds with a CA hands it out repacked to trust that CA
// (the fingerprint is no longer the placeholder's, and the image differs per CA), and
// without a CA as it is.
func TestEmbeddedKPXETrust(t *testing.T) {
	ca := newCA(t, "site CA")
	bin, err := fs.ReadFile(ipxebin.Embedded(), ipxebin.UndionlyKPXE)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bin, ipxebin.PlaceholderFingerprint[:]) {
		t.Fatal("undionly.kpxe holds the placeholder uncompressed: not the compressed image this test is about")
	}
	got, err := (&ipxebin.Builds{CA: ca}).ReadFile(ipxebin.UndionlyKPXE)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, bin) {
		t.Fatal("ReadFile with a CA handed undionly.kpxe out unchanged")
	}
	// The prefix (the PXE loader and the decompressor) is the build's, up to its size field.
	if !bytes.Equal(got[:1024], bin[:1024]) {
		t.Error("the image's first KiB changed")
	}
	other, err := (&ipxebin.Builds{CA: newCA(t, "other CA")}).ReadFile(ipxebin.UndionlyKPXE)
	if err != nil || bytes.Equal(other, got) {
		t.Errorf("two CAs give the same undionly.kpxe (%v)", err)
	}
	got[len(got)-1] ^= 1 // the caller owns what it gets
	again, err := ipxebin.WithTrust(bin, ca)
	if err != nil || again[len(again)-1] == got[len(got)-1] {
		t.Errorf("WithTrust handed out a shared image (%v)", err)
	}
	plain, err := (&ipxebin.Builds{}).ReadFile(ipxebin.UndionlyKPXE)
	if err != nil || !bytes.Equal(plain, bin) {
		t.Fatalf("ReadFile without CA = %d bytes, %v; want the build as it is", len(plain), err)
	}
}

func TestBuildsSiteFS(t *testing.T) {
	ca := newCA(t, "site CA")
	fp := sha256.Sum256(ca.Raw)
	ph := ipxebin.PlaceholderFingerprint[:]
	one := append(append([]byte("head"), ph...), "tail"...)
	site := fstest.MapFS{
		"one.efi":   {Data: one},
		"none.efi":  {Data: []byte("a site build without the placeholder")},
		"twice.efi": {Data: append(append([]byte{}, ph...), ph...)},
	}
	b := &ipxebin.Builds{FS: site, CA: ca}

	got, err := b.ReadFile("one.efi")
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte("head"), fp[:]...), "tail"...)
	if !bytes.Equal(got, want) {
		t.Errorf("one.efi = %x, want %x", got, want)
	}
	for name, wantErr := range map[string]error{
		"none.efi":    ipxebin.ErrNoTrustArea,
		"twice.efi":   ipxebin.ErrManyTrustAreas,
		"missing.efi": fs.ErrNotExist,
	} {
		if _, err := b.ReadFile(name); !errors.Is(err, wantErr) {
			t.Errorf("ReadFile(%s) = %v, want %v", name, err, wantErr)
		}
	}
	if _, err := ipxebin.WithTrust(one, nil); !errors.Is(err, ipxebin.ErrNoCA) {
		t.Errorf("WithTrust(nil CA) = %v, want ErrNoCA", err)
	}
	// Without a CA a site's own build is served as it is, placeholder or not.
	raw, err := (&ipxebin.Builds{FS: site}).ReadFile("none.efi")
	if err != nil || !bytes.Equal(raw, site["none.efi"].Data) {
		t.Errorf("ReadFile without CA = %q, %v", raw, err)
	}
}

// Two CAs give two different binaries: the trust of one is not the trust of the other.
func TestWithTrustDistinguishesCAs(t *testing.T) {
	bin, err := fs.ReadFile(ipxebin.Embedded(), ipxebin.SnponlyX8664)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ipxebin.WithTrust(bin, newCA(t, "site A"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ipxebin.WithTrust(bin, newCA(t, "site B"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Fatal("binaries for two CAs are equal")
	}
}
