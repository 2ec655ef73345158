package sitetls_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/bettercompute/siteboot/sitetls"
)

// TestLoadOrCreateNodeKey: a missing key is created 0600 and read back the same; a file
// that is not a PKCS#8 key, or holds another kind of key, is refused with a FileError
// wrapping ErrNoKey or ErrUnsupportedKey, and left as it was.
func TestLoadOrCreateNodeKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.key")
	k1, err := sitetls.LoadOrCreateNodeKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created key: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	k2, err := sitetls.LoadOrCreateNodeKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Equal(k2) {
		t.Error("the key read back is not the key created")
	}

	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"not pem", []byte("not a key"), sitetls.ErrNoKey},
		{"bad der", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}), sitetls.ErrNoKey},
		{"ecdsa", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), sitetls.ErrUnsupportedKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".key")
			if err := os.WriteFile(p, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := sitetls.LoadOrCreateNodeKey(p)
			var fe *sitetls.FileError
			if !errors.As(err, &fe) || fe.Role != sitetls.RoleKey || fe.Path != p || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want a key FileError wrapping %v", err, tc.want)
			}
			if b, _ := os.ReadFile(p); string(b) != string(tc.data) {
				t.Error("a refused key file was changed")
			}
		})
	}
}
