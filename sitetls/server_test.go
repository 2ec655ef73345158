package sitetls_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// serveOpen serves creds.OpenServerConfig on loopback and answers "ok" to every request.
func serveOpen(t *testing.T, creds *sitetls.Credentials) string {
	t.Helper()
	ln, err := net.Listen("tcp", testIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: creds.OpenServerConfig(), ReadHeaderTimeout: 5 * time.Second, ErrorLog: discardLog(),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return "https://" + ln.Addr().String() + "/"
}

// TestOpenServerConfig: a client with no certificate, speaking TLS 1.2 as iPXE does, is
// served the certificate with its CA appended, and Root names that CA; after the files move
// to another CA, the next check serves the new chain and Root follows.
func TestOpenServerConfig(t *testing.T) {
	clock := clocktest.New(t0)
	dir := t.TempDir()
	ca1 := newCA(t, clock)
	f := write(t, issue(t, ca1, sitetlstest.Request{Hosts: []string{testIP}}), dir, "boot")
	caFile := writeCA(t, dir, "ca.pem", ca1)
	creds := load(t, sitetls.Config{CertFile: f.cert, KeyFile: f.key, CAFile: caFile, Clock: clock, CheckInterval: interval})
	url := serveOpen(t, creds)

	fetch := func(ca *sitetlstest.CA) (*tls.ConnectionState, error) {
		c := client(t, &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12, Time: clock.Now})
		resp, err := c.Get(url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return resp.TLS, nil
	}
	check := func(step string, ca *sitetlstest.CA) {
		t.Helper()
		cs, err := fetch(ca)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if cs.Version != tls.VersionTLS12 {
			t.Errorf("%s: version %x, want TLS 1.2", step, cs.Version)
		}
		pc := cs.PeerCertificates
		if len(pc) != 2 || !bytes.Equal(pc[len(pc)-1].Raw, ca.Cert.Raw) {
			t.Errorf("%s: chain of %d, want the leaf and the CA last", step, len(pc))
		}
		root, err := creds.Root()
		if err != nil || !bytes.Equal(root.Raw, ca.Cert.Raw) {
			t.Errorf("%s: Root = %v, %v; want the CA", step, root, err)
		}
	}
	check("start", ca1)

	ca2 := newCA(t, clock)
	p2 := issue(t, ca2, sitetlstest.Request{Hosts: []string{testIP}, NotBefore: clock.Now()})
	if err := p2.WriteFiles(f.cert, f.key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, ca2.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	clock.Advance(interval)
	check("after the move to another CA", ca2)
	if _, err := fetch(ca1); err == nil {
		t.Error("a client trusting only the old CA connected after the move")
	}
}

// TestRootNotChained: a first certificate from a CA outside the bundle has no root.
func TestRootNotChained(t *testing.T) {
	clock := clocktest.New(t0)
	dir := t.TempDir()
	other := newCA(t, clock)
	f := write(t, issue(t, other, sitetlstest.Request{Hosts: []string{testIP}}), dir, "boot")
	creds := load(t, sitetls.Config{CertFile: f.cert, KeyFile: f.key, CAFile: writeCA(t, dir, "ca.pem", newCA(t, clock)), Clock: clock})
	if _, err := creds.Root(); !errors.Is(err, sitetls.ErrNoRoot) {
		t.Errorf("Root: %v, want ErrNoRoot", err)
	}
}
