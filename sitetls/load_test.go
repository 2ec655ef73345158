package sitetls_test

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// loadCase prepares an agent's files in dir; mutate may spoil one of them and says which
// file the error must name.
type loadCase struct {
	name    string
	mutate  func(t *testing.T, f fileSet) string // returns the path the error must name
	wantErr error
	role    string
}

// fileSet is an agent's good files, and what else a case may need.
type fileSet struct {
	cert, key, ca string
	ca1           *sitetlstest.CA
	clock         *clocktest.Fake
	dir           string
}

func chmod(mode fs.FileMode, which func(fileSet) string) func(*testing.T, fileSet) string {
	return func(t *testing.T, f fileSet) string {
		p := which(f)
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func replaceWith(b []byte, which func(fileSet) string) func(*testing.T, fileSet) string {
	return func(t *testing.T, f fileSet) string {
		p := which(f)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func certOf(f fileSet) string { return f.cert }
func keyOf(f fileSet) string  { return f.key }
func caOf(f fileSet) string   { return f.ca }

// spoilers are the ways a file can be bad, shared by the Load and the reload tests.
func spoilers() []loadCase {
	x25519, _ := ecdh.X25519().GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(x25519)
	x25519PEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return []loadCase{
		{"key world-readable", chmod(0o644, keyOf), sitetls.ErrInsecureFile, sitetls.RoleKey},
		{"key group-readable", chmod(0o640, keyOf), sitetls.ErrInsecureFile, sitetls.RoleKey},
		{"key group-writable", chmod(0o620, keyOf), sitetls.ErrInsecureFile, sitetls.RoleKey},
		{"key other-executable", chmod(0o601, keyOf), sitetls.ErrInsecureFile, sitetls.RoleKey},
		{"certificate world-readable", chmod(0o604, certOf), sitetls.ErrInsecureFile, sitetls.RoleCert},
		{"certificate group-readable", chmod(0o640, certOf), sitetls.ErrInsecureFile, sitetls.RoleCert},
		{"CA bundle world-writable", chmod(0o646, caOf), sitetls.ErrInsecureFile, sitetls.RoleCA},
		{"CA bundle group-writable", chmod(0o664, caOf), sitetls.ErrInsecureFile, sitetls.RoleCA},
		{"key missing", func(t *testing.T, f fileSet) string {
			os.Remove(f.key)
			return f.key
		}, fs.ErrNotExist, sitetls.RoleKey},
		{"certificate is a directory", func(t *testing.T, f fileSet) string {
			os.Remove(f.cert)
			os.Mkdir(f.cert, 0o700)
			return f.cert
		}, sitetls.ErrNotRegular, sitetls.RoleCert},
		{"certificate too large", replaceWith(make([]byte, sitetls.MaxFileBytes+1), certOf), sitetls.ErrTooLarge, sitetls.RoleCert},
		{"certificate garbage", replaceWith([]byte("not a certificate\n"), certOf), sitetls.ErrNoCertificate, sitetls.RoleCert},
		{"certificate block that does not parse", replaceWith(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}), certOf), sitetls.ErrNoCertificate, sitetls.RoleCert},
		{"key empty", replaceWith(nil, keyOf), sitetls.ErrNoKey, sitetls.RoleKey},
		{"key X25519", replaceWith(x25519PEM, keyOf), sitetls.ErrUnsupportedKey, sitetls.RoleKey},
		{"key of another certificate", func(t *testing.T, f fileSet) string {
			other := issue(t, f.ca1, sitetlstest.Request{Node: nodeA})
			if err := os.WriteFile(f.key, other.KeyPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			return f.key
		}, sitetls.ErrKeyMismatch, sitetls.RoleKey},
		{"certificate expired", func(t *testing.T, f fileSet) string {
			p := issue(t, f.ca1, sitetlstest.Request{Node: nodeA, NotBefore: f.clock.Now().Add(-48 * time.Hour), Lifetime: 24 * time.Hour})
			if err := p.WriteFiles(f.cert, f.key); err != nil {
				t.Fatal(err)
			}
			return f.cert
		}, sitetls.ErrExpired, sitetls.RoleCert},
		{"certificate not yet valid", func(t *testing.T, f fileSet) string {
			p := issue(t, f.ca1, sitetlstest.Request{Node: nodeA, NotBefore: f.clock.Now().Add(time.Hour)})
			if err := p.WriteFiles(f.cert, f.key); err != nil {
				t.Fatal(err)
			}
			return f.cert
		}, sitetls.ErrNotYetValid, sitetls.RoleCert},
		{"CA bundle garbage", replaceWith([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), caOf), sitetls.ErrNoCertificate, sitetls.RoleCA},
		{"CA bundle empty", replaceWith(nil, caOf), sitetls.ErrNoCertificate, sitetls.RoleCA},
	}
}

func goodFiles(t *testing.T) fileSet {
	dir := t.TempDir()
	clock := clocktest.New(t0)
	ca := newCA(t, clock)
	p := issue(t, ca, sitetlstest.Request{Node: nodeA})
	f := write(t, p, dir, "agent")
	return fileSet{cert: f.cert, key: f.key, ca: writeCA(t, dir, "ca.pem", ca), ca1: ca, clock: clock, dir: dir}
}

func (f fileSet) config() sitetls.Config {
	return sitetls.Config{CertFile: f.cert, KeyFile: f.key, CAFile: f.ca, Clock: f.clock}
}

// TestLoadRefuses: every bad file is refused at Load with a *FileError naming it, and the
// error never carries key material.
func TestLoadRefuses(t *testing.T) {
	for _, tt := range spoilers() {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFiles(t)
			keyPEM, _ := os.ReadFile(f.key)
			path := tt.mutate(t, f)
			c, err := sitetls.Load(f.config())
			if err == nil {
				t.Fatalf("Load succeeded (%v), want %v", c.Status().Leaf.Subject, tt.wantErr)
			}
			checkFileError(t, err, tt.wantErr, tt.role, path)
			if b64 := string(keyPEM[len("-----BEGIN PRIVATE KEY-----\n"):][:40]); strings.Contains(err.Error(), b64) {
				t.Errorf("error holds key material: %v", err)
			}
		})
	}
}

func checkFileError(t *testing.T, err, want error, role, path string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("error %v, want errors.Is %v", err, want)
	}
	var fe *sitetls.FileError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *FileError", err, err)
	}
	if fe.Role != role || fe.Path != path {
		t.Errorf("FileError names %s %s, want %s %s", fe.Role, fe.Path, role, path)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error text %q does not name %s", err, path)
	}
}

// TestLoadAccepts: the modes and layouts that must load.
func TestLoadAccepts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, f *fileSet)
	}{
		{"0600 files, CA 0600", func(*testing.T, *fileSet) {}},
		{"0400 key and certificate, CA 0644", func(t *testing.T, f *fileSet) {
			for p, m := range map[string]fs.FileMode{f.key: 0o400, f.cert: 0o400, f.ca: 0o644} {
				if err := os.Chmod(p, m); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"key and certificate in one file", func(t *testing.T, f *fileSet) {
			c, _ := os.ReadFile(f.cert)
			k, _ := os.ReadFile(f.key)
			if err := os.WriteFile(f.cert, append(k, c...), 0o600); err != nil {
				t.Fatal(err)
			}
			f.key = f.cert
		}},
		{"symlinks to 0600 files (a rotated secret volume)", func(t *testing.T, f *fileSet) {
			for _, p := range []*string{&f.cert, &f.key} {
				link := *p + ".link"
				if err := os.Symlink(*p, link); err != nil {
					t.Fatal(err)
				}
				*p = link
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFiles(t)
			tt.mutate(t, &f)
			c, err := sitetls.Load(f.config())
			if err != nil {
				t.Fatal(err)
			}
			if st := c.Status(); st.Identity != nodeA || st.Err != nil {
				t.Errorf("Status: identity %v, err %v; want %v, nil", st.Identity, st.Err, nodeA)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	good := sitetls.Config{CertFile: "c", KeyFile: "k", CAFile: "a"}
	tests := []struct {
		name string
		edit func(*sitetls.Config)
		ok   bool
	}{
		{"good", func(*sitetls.Config) {}, true},
		{"no cert", func(c *sitetls.Config) { c.CertFile = "" }, false},
		{"no key", func(c *sitetls.Config) { c.KeyFile = "" }, false},
		{"no CA", func(c *sitetls.Config) { c.CAFile = "" }, false},
		{"negative interval", func(c *sitetls.Config) { c.CheckInterval = -time.Second }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			err := c.Validate()
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, sitetls.ErrConfig)) {
				t.Errorf("Validate = %v, ok want %v", err, tt.ok)
			}
		})
	}
}
