package agent_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
)

// siteLink is a host's own control plane link: here it holds the lease for the agent (it
// answers each heartbeat with the heartbeat's own number, so the fence counts from it) and
// hands it one boot entry on the first heartbeat.
type siteLink struct {
	mu    sync.Mutex
	entry sitelink.ProxyDhcpEntry
	sent  bool
	beats int
}

func (l *siteLink) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.beats++
	d := sitelink.SyncResponse{SiteSpec: sitelink.SiteSpec{Lease: sitelink.BootLeaseState{Holds: true, Epoch: 1, TTLMs: 15000, Beat: r.Beat}}}
	if !l.sent {
		d.Commands = []sitelink.Command{{ID: "cmd-1", Kind: sitelink.KindPrepareRamdisk, Entries: []sitelink.ProxyDhcpEntry{l.entry}}}
		l.sent = true
	}
	return d, nil
}

func (l *siteLink) Token(ctx context.Context, q sitelink.TokenRequest) (string, error) {
	return "bcjt_example", nil
}

// A Go host wires the agent itself: a typed Config from DefaultConfig, its own Link to its
// control plane, and a listener it bound. No configuration file is involved.
func Example() {
	dir, _ := os.MkdirTemp("", "siteagent-example")
	defer os.RemoveAll(dir)

	cfg := agent.DefaultConfig()
	cfg.SiteID, cfg.NodeID, cfg.DataDir = "site-1", "agent-1", dir
	cfg.Boot.Kernel = agent.Image{URL: "http://192.0.2.10/vmlinuz", SHA256: strings.Repeat("a", 64)}
	cfg.Boot.Initrd = agent.Image{URL: "http://192.0.2.10/initrd", SHA256: strings.Repeat("b", 64)}
	cfg.Control.URL = "https://control.example.net" // the Link below is used instead of the agent's own
	cfg.Metrics.Listen = netip.AddrPort{}           // no /metrics

	ln, err := net.Listen("tcp", "127.0.0.1:0") // the host's own socket for /boot/ and /cache/
	if err != nil {
		panic(err)
	}
	cfg.Boot.HTTPBase = "http://" + ln.Addr().String()
	mac := hwid.MustParseMAC("52:54:00:12:34:56")
	link := &siteLink{entry: sitelink.ProxyDhcpEntry{MAC: mac, Arch: sitelink.ArchX86UEFI, Workflow: "wf-1",
		TokenRef: "tok-1", NotAfter: time.Now().Add(time.Hour)}}

	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, &cfg, link, agent.Options{
		Signer:       ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)),
		HTTPListener: ln,
	})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for _, ok := a.Entries().Lookup(mac); !ok; _, ok = a.Entries().Lookup(mac) {
		time.Sleep(time.Millisecond) // the first heartbeat brings the entry
	}

	resp, err := http.Get(a.HTTPBase() + "/boot/ipxe?mac=" + mac.String() + "&platform=efi&buildarch=x86_64")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println("script:", resp.StatusCode, strings.Contains(string(body), "bc.token=bcjt_example"))
	fs := a.Fence()
	fmt.Println("fence:", fs.Active, fs.Epoch)

	cancel()
	fmt.Println("stopped:", <-done)
	http.DefaultClient.CloseIdleConnections()
	// Output:
	// script: 200 true
	// fence: true 1
	// stopped: <nil>
}
