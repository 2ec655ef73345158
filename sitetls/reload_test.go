package sitetls_test

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/internal/testlog"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

const interval = 10 * time.Second

// link is a control plane and an agent on loopback, on one fake clock, with the files of
// both in one directory.
type link struct {
	clock       *clocktest.Fake
	ca          *sitetlstest.CA
	dir         string
	caFile      string
	srvF, agF   files
	srv, ag     *sitetls.Credentials
	server      *server
	agentClient func() reply
	agentLog    *testlog.Buffer
}

func newLink(t *testing.T) *link {
	t.Helper()
	l := &link{clock: clocktest.New(t0), dir: t.TempDir()}
	l.ca = newCA(t, l.clock)
	l.caFile = writeCA(t, l.dir, "ca.pem", l.ca)
	l.srvF = write(t, issue(t, l.ca, sitetlstest.Request{Hosts: []string{testIP}}), l.dir, "server")
	l.agF = write(t, issue(t, l.ca, sitetlstest.Request{Node: nodeA}), l.dir, "agent")
	l.srv = load(t, sitetls.Config{CertFile: l.srvF.cert, KeyFile: l.srvF.key, CAFile: l.caFile, Clock: l.clock, CheckInterval: interval})
	l.agentLog = &testlog.Buffer{}
	l.ag = load(t, sitetls.Config{CertFile: l.agF.cert, KeyFile: l.agF.key, CAFile: l.caFile, Clock: l.clock,
		CheckInterval: interval, Logger: slog.New(slog.NewTextHandler(l.agentLog, nil))})
	l.server = serve(t, l.srv)
	c := client(t, l.ag.ClientConfig(testIP))
	l.agentClient = func() reply { return get(c, l.server.url) }
	return l
}

// serials makes one request and returns "AGENT-SERIAL SERVER-SERIAL" as each side saw
// the other's, or the error.
func (l *link) serials() string {
	r := l.agentClient()
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	if r.status != 200 {
		return fmt.Sprintf("status %d: %s", r.status, r.body)
	}
	_, agentSerial, _ := strings.Cut(r.body, " ")
	return agentSerial + " " + r.serverSerial
}

func pair(a, s string) string { return a + " " + s }

// TestReload: a rotated certificate (replaced by rename, or rewritten in place) is served
// from the first handshake one check interval later, on either side, without a restart; a
// CA dropped from a bundle stops admitting new connections the same way.
func TestReload(t *testing.T) {
	l := newLink(t)
	first := l.ag.Status().Leaf
	ag0 := first.SerialNumber.Text(16)
	srv0 := l.srv.Status().Leaf.SerialNumber.Text(16)
	if got, want := l.serials(), pair(ag0, srv0); got != want {
		t.Fatalf("start: %s, want %s", got, want)
	}

	// The agent's certificate renewed by rename (a new inode).
	// Renewals start now, not backdated: they outlive the first pair by an hour.
	ag1 := issue(t, l.ca, sitetlstest.Request{Node: nodeA, NotBefore: l.clock.Now()})
	if err := ag1.WriteFiles(l.agF.cert, l.agF.key); err != nil {
		t.Fatal(err)
	}
	l.clock.Advance(interval - time.Second)
	if got, want := l.serials(), pair(ag0, srv0); got != want {
		t.Errorf("within the check interval: %s, want the old pair %s", got, want)
	}
	l.clock.Advance(time.Second)
	if got, want := l.serials(), pair(serial(ag1), srv0); got != want {
		t.Errorf("one interval after the agent's renewal: %s, want %s", got, want)
	}

	// The server's certificate rewritten in place (same inode).
	srv1 := issue(t, l.ca, sitetlstest.Request{Hosts: []string{testIP}, NotBefore: l.clock.Now()})
	if err := os.WriteFile(l.srvF.key, srv1.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.srvF.cert, srv1.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	l.clock.Advance(interval)
	if got, want := l.serials(), pair(serial(ag1), serial(srv1)); got != want {
		t.Errorf("one interval after the server's renewal: %s, want %s", got, want)
	}

	// The agent's renewed certificate expires: had it not been reloaded, this would fail.
	l.clock.Set(t0.Add(23*time.Hour + 30*time.Minute))
	if now := l.clock.Now(); !now.After(first.NotAfter) || !now.Before(ag1.Cert.NotAfter) {
		t.Fatalf("test clock %v not between the first expiry %v and the renewal's %v", now, first.NotAfter, ag1.Cert.NotAfter)
	}
	if got, want := l.serials(), pair(serial(ag1), serial(srv1)); got != want {
		t.Errorf("past the first certificates' expiry: %s, want %s", got, want)
	}

	// The server's CA bundle moves to a new CA: the agent's certificate of the old one is
	// refused from the next check on.
	ca2 := newCA(t, l.clock)
	if err := os.WriteFile(l.caFile, ca2.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	l.clock.Advance(interval)
	if got := l.serials(); !strings.HasPrefix(got, "error: ") {
		t.Errorf("after the server's CA bundle dropped the agent's CA: %s, want a refused handshake", got)
	}
	if st := l.srv.Status(); st.Reloads != 2 || st.Failures != 0 || st.Err != nil {
		t.Errorf("server status: %d reloads, %d failures, err %v; want 2, 0, nil", st.Reloads, st.Failures, st.Err)
	}
}

// TestBadNewFileKeepsLastGood: a bad new file never interrupts the link: the last good pair
// (or CA bundle) stays in use, the error names the file, and a good file is taken once it
// appears.
func TestBadNewFileKeepsLastGood(t *testing.T) {
	for _, tt := range spoilers() {
		t.Run(tt.name, func(t *testing.T) {
			l := newLink(t)
			ag0 := l.ag.Status().Leaf.SerialNumber.Text(16)
			srv0 := l.srv.Status().Leaf.SerialNumber.Text(16)
			keyPEM, err := os.ReadFile(l.agF.key)
			if err != nil {
				t.Fatal(err)
			}
			// Spoil the agent's files (the CA bundle is shared by both sides).
			f := fileSet{cert: l.agF.cert, key: l.agF.key, ca: l.caFile, ca1: l.ca, clock: l.clock, dir: l.dir}
			path := tt.mutate(t, f)
			l.clock.Advance(interval)
			if got, want := l.serials(), pair(ag0, srv0); got != want {
				t.Fatalf("after the bad file: %s, want the last good pair %s", got, want)
			}
			st := l.ag.Status()
			if st.Err == nil {
				t.Fatal("Status().Err is nil after a bad file")
			}
			checkFileError(t, st.Err, tt.wantErr, tt.role, path)
			if st.Failures == 0 || st.Leaf.SerialNumber.Text(16) != ag0 {
				t.Errorf("status: %d failures, serving %x; want failures, serving %s", st.Failures, st.Leaf.SerialNumber, ag0)
			}
			checkFileError(t, l.ag.Check(), tt.wantErr, tt.role, path)
			logs := l.agentLog.String()
			if n := strings.Count(logs, "keeping the last good credentials"); n != 1 || !strings.Contains(logs, path) {
				t.Errorf("log: %d warnings naming %s, want 1:\n%s", n, path, logs)
			}
			for _, line := range strings.Split(string(keyPEM), "\n")[1:3] {
				if strings.Contains(logs, line) {
					t.Errorf("log holds key material:\n%s", logs)
				}
			}

			// Repair: a good renewal, by rename, so a directory in the way goes too.
			os.RemoveAll(l.agF.cert)
			os.RemoveAll(l.agF.key)
			ag1 := issue(t, l.ca, sitetlstest.Request{Node: nodeA})
			if err := ag1.WriteFiles(l.agF.cert, l.agF.key); err != nil {
				t.Fatal(err)
			}
			if tt.role == sitetls.RoleCA {
				os.RemoveAll(l.caFile)
				writeCA(t, l.dir, "ca.pem", l.ca)
			}
			l.clock.Advance(interval)
			if got, want := l.serials(), pair(serial(ag1), srv0); got != want {
				t.Errorf("after the repair: %s, want %s", got, want)
			}
			if err := l.ag.Status().Err; err != nil {
				t.Errorf("Status().Err after the repair: %v", err)
			}
		})
	}
}

// TestStatusExpired: the certificate in use expiring is reported even though no file
// changed.
func TestStatusExpired(t *testing.T) {
	l := newLink(t)
	if err := l.ag.Status().Err; err != nil {
		t.Fatalf("fresh: %v", err)
	}
	l.clock.Advance(sitetlstest.DefaultLifetime)
	checkFileError(t, l.ag.Status().Err, sitetls.ErrExpired, sitetls.RoleCert, l.agF.cert)
}

// TestRotationNoLapse: handshakes running while the agent's and server's certificates are
// renewed over and over, key and certificate replaced one after the other (so a check may
// see a half-done pair), all succeed: each sees a good pair, old or new.
func TestRotationNoLapse(t *testing.T) {
	l := newLink(t)
	const workers, requests, rotations = 4, 15, 10
	var wg sync.WaitGroup
	errs := make(chan string, workers*requests)
	for range workers {
		wg.Go(func() {
			for range requests {
				if got := l.serials(); strings.HasPrefix(got, "error") || strings.HasPrefix(got, "status") {
					errs <- got
				}
			}
		})
	}
	for range rotations {
		ag := issue(t, l.ca, sitetlstest.Request{Node: nodeA})
		srv := issue(t, l.ca, sitetlstest.Request{Hosts: []string{testIP}})
		// Certificate first: the worst order, a check in between sees a mismatched pair.
		if err := ag.WriteFiles(l.agF.cert, ""); err != nil {
			t.Fatal(err)
		}
		l.clock.Advance(interval)
		if err := ag.WriteFiles(l.agF.cert, l.agF.key); err != nil {
			t.Fatal(err)
		}
		if err := srv.WriteFiles(l.srvF.cert, l.srvF.key); err != nil {
			t.Fatal(err)
		}
		l.clock.Advance(interval)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// The last renewal is what is served after one more check.
	l.clock.Advance(interval)
	l.serials()
	if st := l.ag.Status(); st.Err != nil || st.Reloads == 0 {
		t.Errorf("agent status after the rotations: %d reloads, err %v", st.Reloads, st.Err)
	}
}

// TestReloadRefusesUntrustedIssuer performs the untrusted-renewal attack: the agent's certificate is
// replaced by one from a CA the control plane does not trust (valid, its key matching).
// The agent keeps the certificate in use, so the link holds, and reports the refusal; a
// later renewal from the trusted CA is adopted. With IssuerFile, a certificate is checked
// against that bundle instead of CAFile.
func TestReloadRefusesUntrustedIssuer(t *testing.T) {
	l := newLink(t)
	ag0 := l.ag.Status().Leaf.SerialNumber.Text(16)
	srv0 := l.srv.Status().Leaf.SerialNumber.Text(16)

	rogue := newCA(t, l.clock)
	bad := issue(t, rogue, sitetlstest.Request{Node: nodeA, NotBefore: l.clock.Now()})
	if err := bad.WriteFiles(l.agF.cert, l.agF.key); err != nil {
		t.Fatal(err)
	}
	l.clock.Advance(interval)
	if got, want := l.serials(), pair(ag0, srv0); got != want {
		t.Fatalf("after a certificate of an untrusted CA: %s, want the last good pair %s", got, want)
	}
	st := l.ag.Status()
	checkFileError(t, st.Err, sitetls.ErrUntrustedCert, sitetls.RoleCert, l.agF.cert)
	if st.Failures == 0 || st.Leaf.SerialNumber.Text(16) != ag0 {
		t.Errorf("status: %d failures, serving %x; want failures, serving %s", st.Failures, st.Leaf.SerialNumber, ag0)
	}
	if logs := l.agentLog.String(); !strings.Contains(logs, "does not chain") {
		t.Errorf("the refusal is not logged:\n%s", logs)
	}

	good := issue(t, l.ca, sitetlstest.Request{Node: nodeA, NotBefore: l.clock.Now()})
	if err := good.WriteFiles(l.agF.cert, l.agF.key); err != nil {
		t.Fatal(err)
	}
	l.clock.Advance(interval)
	if got, want := l.serials(), pair(serial(good), srv0); got != want {
		t.Errorf("after a renewal from the trusted CA: %s, want %s", got, want)
	}

	// A side whose certificate comes from another CA than the one it verifies its peers
	// against names that CA in IssuerFile.
	t.Run("IssuerFile", func(t *testing.T) {
		dir := t.TempDir()
		own := newCA(t, l.clock)
		ownFile := writeCA(t, dir, "issuer.pem", own)
		f := write(t, issue(t, own, sitetlstest.Request{Node: nodeA}), dir, "node")
		creds := load(t, sitetls.Config{CertFile: f.cert, KeyFile: f.key, CAFile: l.caFile, IssuerFile: ownFile,
			Clock: l.clock, CheckInterval: interval})
		next := issue(t, own, sitetlstest.Request{Node: nodeA, NotBefore: l.clock.Now()})
		if err := next.WriteFiles(f.cert, f.key); err != nil {
			t.Fatal(err)
		}
		if err := creds.Check(); err != nil {
			t.Fatalf("a renewal from the IssuerFile CA: %v", err)
		}
		if got := creds.Status().Leaf.SerialNumber.Text(16); got != serial(next) {
			t.Errorf("serving %s, want the renewal %s", got, serial(next))
		}
		other := issue(t, l.ca, sitetlstest.Request{Node: nodeA, NotBefore: l.clock.Now()})
		if err := other.WriteFiles(f.cert, f.key); err != nil {
			t.Fatal(err)
		}
		checkFileError(t, creds.Check(), sitetls.ErrUntrustedCert, sitetls.RoleCert, f.cert)
		if got := creds.Status().Leaf.SerialNumber.Text(16); got != serial(next) {
			t.Errorf("serving %s after a certificate of CAFile's CA, want %s", got, serial(next))
		}
	})
}
