package sitetlstest_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// A CA made at start certifies the agent's node key; the agent's files are written 0600.
func Example() {
	dir, _ := os.MkdirTemp("", "sitetlstest-example")
	defer os.RemoveAll(dir)
	ca, err := sitetlstest.NewCA("lab CA", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	agent, err := ca.Issue(sitetlstest.Request{Node: sitetls.Identity{Site: "site-lab", Node: "node-agent-a"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	cert, key := filepath.Join(dir, "agent.pem"), filepath.Join(dir, "agent.key")
	if err := agent.WriteFiles(cert, key); err != nil {
		fmt.Println(err)
		return
	}
	fi, _ := os.Stat(key)
	fmt.Println(agent.Cert.URIs[0], agent.Cert.NotAfter.Sub(agent.Cert.NotBefore), fi.Mode().Perm())
	// Output: spiffe://site-lab/agent/node-agent-a 24h0m0s -rw-------
}
