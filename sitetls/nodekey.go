package sitetls

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/bettercompute/siteboot/internal/atomicfile"
)

// LoadOrCreateNodeKey reads a node's Ed25519 key (PKCS#8 PEM) from path, creating a new one
// (mode 0600, written atomically) when the file does not exist. The key signs the node's
// discovery assertions and is the key its site certificate must be for ([LoadNode]).
// Errors are a *[FileError] for the key's role: one wrapping ErrNoKey for a file that holds
// no PKCS#8 PEM private key, ErrUnsupportedKey for a key that is not Ed25519.
func LoadOrCreateNodeKey(path string) (ed25519.PrivateKey, error) {
	fail := func(err error) (ed25519.PrivateKey, error) {
		return nil, &FileError{Role: RoleKey, Path: path, Err: err}
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return fail(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return fail(err)
		}
		if err := atomicfile.Write(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return fail(err)
		}
		return key, nil
	}
	if err != nil {
		return fail(err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return fail(fmt.Errorf("%w: not a PKCS#8 PEM private key", ErrNoKey))
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrNoKey, err))
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return fail(fmt.Errorf("%w: %T, want an Ed25519 key", ErrUnsupportedKey, k))
	}
	return key, nil
}
