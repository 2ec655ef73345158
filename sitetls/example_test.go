package sitetls_test

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// A control plane admits an agent by its site certificate and learns its node identity from
// it; a client without one never reaches the handler.
func Example() {
	dir, err := os.MkdirTemp("", "sitetls-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	// The agent's Ed25519 node key, certified by a CA made for the example.
	nodeKey := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	lab, err := sitetlstest.NewLink(dir, nil, sitetls.Identity{Site: "site-fsn1", Node: "node-agent-a"}, nodeKey, "127.0.0.1")
	if err != nil {
		fmt.Println(err)
		return
	}

	// Control plane.
	cpCreds, err := sitetls.Load(lab.ServerConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{
		TLSConfig:         cpCreds.ServerConfig(),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          discardLog(),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, err := sitetls.NodeFrom(r)
			if err != nil {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			fmt.Fprintf(w, "hello %s of %s", id.Node, id.Site)
		}),
	}
	go srv.ServeTLS(ln, "", "")
	defer srv.Shutdown(context.Background())
	url := "https://" + ln.Addr().String() + "/v1/sync"

	// Agent.
	agCreds, err := sitetls.Load(lab.AgentConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	tr := &http.Transport{TLSClientConfig: agCreds.ClientConfig("127.0.0.1")}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))

	// Someone who trusts the CA but has no certificate.
	anon := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: lab.CA.Pool(), MinVersion: tls.VersionTLS13}}
	defer anon.CloseIdleConnections()
	if _, err := (&http.Client{Transport: anon}).Get(url); err != nil {
		fmt.Println("without a certificate: refused")
	}
	// Output:
	// 200 hello node-agent-a of site-fsn1
	// without a certificate: refused
}
