package sitetls_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0     = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	nodeA  = sitetls.Identity{Site: "site-fsn1", Node: "node-agent-a"}
	nodeB  = sitetls.Identity{Site: "site-fsn1", Node: "node-agent-b"}
	testIP = "127.0.0.1"
)

// files is a certificate and key written to a directory.
type files struct{ cert, key string }

func write(t *testing.T, p *sitetlstest.Pair, dir, name string) files {
	t.Helper()
	f := files{cert: filepath.Join(dir, name+".pem"), key: filepath.Join(dir, name+".key")}
	if err := p.WriteFiles(f.cert, f.key); err != nil {
		t.Fatal(err)
	}
	return f
}

func writeCA(t *testing.T, dir, name string, cas ...*sitetlstest.CA) string {
	t.Helper()
	var b []byte
	for _, ca := range cas {
		b = append(b, ca.CertPEM...)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newCA(t *testing.T, clock *clocktest.Fake) *sitetlstest.CA {
	t.Helper()
	ca, err := sitetlstest.NewCA("test CA", clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func issue(t *testing.T, ca *sitetlstest.CA, r sitetlstest.Request) *sitetlstest.Pair {
	t.Helper()
	p, err := ca.Issue(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, cfg sitetls.Config) *sitetls.Credentials {
	t.Helper()
	c, err := sitetls.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// server is a control plane on loopback: it answers "IDENTITY SERIAL" of the verified
// client, or 403 when NodeFrom fails, and counts the requests that reached the handler.
type server struct {
	url     string
	port    string
	handled atomic.Int64
}

func serve(t *testing.T, creds *sitetls.Credentials) *server {
	t.Helper()
	ln, err := net.Listen("tcp", testIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{}
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	s.url = "https://" + ln.Addr().String() + "/v1/sync"
	srv := &http.Server{
		TLSConfig:         creds.ServerConfig(),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          discardLog(),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.handled.Add(1)
			id, err := sitetls.NodeFrom(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
			fmt.Fprintf(w, "%s %x", id, r.TLS.VerifiedChains[0][0].SerialNumber)
		}),
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

// client makes one connection (one handshake) per request.
func client(t *testing.T, cfg *tls.Config) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// reply is what one request got: the status and body, the server's serial, or the error.
type reply struct {
	status       int
	body         string
	serverSerial string
	err          error
}

func get(c *http.Client, url string) reply {
	resp, err := c.Get(url)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, body: string(b), err: err}
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		r.serverSerial = fmt.Sprintf("%x", resp.TLS.PeerCertificates[0].SerialNumber)
	}
	return r
}

func serial(p *sitetlstest.Pair) string { return fmt.Sprintf("%x", p.Cert.SerialNumber) }
