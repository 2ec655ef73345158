package sitetls_test

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// BenchmarkHandshake compares a full mutual TLS 1.3 handshake (Ed25519 on both sides) made
// with this package's configurations, which look at the files and verify against the
// current CA bundle on every handshake, with the same handshake made with static crypto/tls
// configurations, over an in-memory pipe.
func BenchmarkHandshake(b *testing.B) {
	dir := b.TempDir()
	l, err := sitetlstest.NewLink(dir, nil, nodeA, nil, "control.example")
	if err != nil {
		b.Fatal(err)
	}
	srv, err := sitetls.Load(l.ServerConfig())
	if err != nil {
		b.Fatal(err)
	}
	ag, err := sitetls.Load(l.AgentConfig())
	if err != nil {
		b.Fatal(err)
	}
	srvPair, err := tls.X509KeyPair(l.Server.CertPEM, l.Server.KeyPEM)
	if err != nil {
		b.Fatal(err)
	}
	agPair, err := tls.X509KeyPair(l.Agent.CertPEM, l.Agent.KeyPEM)
	if err != nil {
		b.Fatal(err)
	}
	static := struct{ server, client *tls.Config }{
		server: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{srvPair},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: l.CA.Pool(), SessionTicketsDisabled: true},
		client: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{agPair},
			RootCAs: l.CA.Pool(), ServerName: "control.example"},
	}
	handshake := func(server, client *tls.Config) {
		a, z := net.Pipe()
		errc := make(chan error, 1)
		go func() {
			errc <- tls.Server(z, server).Handshake()
			z.Close() // not Close on the tls.Conn: its close_notify would wait for a reader
		}()
		if err := tls.Client(a, client).Handshake(); err != nil {
			b.Fatal(err)
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		a.Close()
	}
	ours := struct{ server, client *tls.Config }{srv.ServerConfig(), ag.ClientConfig("control.example")}
	// Interleaved, one of each per iteration, so that the machine's load falls on both.
	var tOurs, tStatic time.Duration
	for b.Loop() {
		t := time.Now()
		handshake(ours.server, ours.client)
		tOurs += time.Since(t)
		t = time.Now()
		handshake(static.server, static.client)
		tStatic += time.Since(t)
	}
	b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "sitetls-ns/handshake")
	b.ReportMetric(float64(tStatic.Nanoseconds())/float64(b.N), "static-ns/handshake")
	b.ReportMetric(float64(tOurs)/float64(tStatic), "ratio")
}

// BenchmarkCheck is the cost of one look at unchanged files (three stats), what a handshake
// pays at most once per CheckInterval.
func BenchmarkCheck(b *testing.B) {
	l, err := sitetlstest.NewLink(b.TempDir(), nil, nodeA, nil, "control.example")
	if err != nil {
		b.Fatal(err)
	}
	c, err := sitetls.Load(l.AgentConfig())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := c.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
