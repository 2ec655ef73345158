package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

const (
	siteID     = "site-lab"
	clientPort = 10068 // where proxy DHCP answers the lab's machines (they cannot bind 68)
	leaseTTL   = 3 * time.Second
)

// image is one generated image of the lab, served by the lab's image origin.
type image struct {
	name   string
	data   []byte
	sha256 string
}

func newImage(name string, size int) image {
	b := make([]byte, size)
	rand.Read(b)
	s := sha256.Sum256(b)
	return image{name: name, data: b, sha256: hex.EncodeToString(s[:])}
}

// lab is everything bootlab runs: an image origin, a control plane and two site agents.
type lab struct {
	dir    string
	log    *slog.Logger
	origin string // base URL of the image origin
	kernel image
	initrd image
	deploy image
	builds map[string]image // the iPXE builds in the TFTP root

	plane    *controlplane.Plane
	planeURL string
	ca       *sitetlstest.CA // the site's CA, made at start: the control plane and agents trust it
	caFile   string
	verifier *assertion.Verifier
	keys     assertion.StaticKeys // the agents' keys, as the control plane knows them

	agents []*labAgent

	// warm holds the origin's answers for the deploy image until closed (release), so
	// that the agents' site sections show it warming.
	warm        chan struct{}
	releaseWarm sync.Once

	mu      sync.Mutex
	secrets []string          // every token, grant and assertion handed out, and the node keys
	metrics map[string]string // each agent's /metrics, read before it stopped
}

// secret notes something that must never appear in a log, a metric or a status report.
func (l *lab) secret(s ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range s {
		if x != "" {
			l.secrets = append(l.secrets, x)
		}
	}
}

// labAgent is one site agent of the lab and how to stop it.
type labAgent struct {
	name   string
	ip     netip.Addr
	a      *agent.Agent
	stop   context.CancelFunc
	done   chan error
	pubkey ed25519.PublicKey
	cfg    agent.Config
}

func (l *lab) agentByIP(ip netip.Addr) string {
	for _, a := range l.agents {
		if a.ip == ip {
			return a.name
		}
	}
	return ip.String()
}

// serve runs an HTTP handler on a loopback address until ctx ends, and returns its base URL.
func serve(ctx context.Context, addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return "http://" + ln.Addr().String(), nil
}

// serveTLS runs srv over TLS on a loopback address until ctx ends, and returns its base URL.
func serveTLS(ctx context.Context, addr string, srv *http.Server) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	go srv.ServeTLS(ln, "", "")
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return "https://" + ln.Addr().String(), nil
}

func newLab(ctx context.Context, log *slog.Logger) (*lab, error) {
	dir, err := os.MkdirTemp("", "bootlab-")
	if err != nil {
		return nil, err
	}
	l := &lab{
		dir: dir, log: log,
		kernel: newImage("vmlinuz", 2<<20),
		initrd: newImage("initrd.img", 4<<20),
		deploy: newImage("ubuntu-24.04.raw", 8<<20),
		builds: map[string]image{},
		warm:   make(chan struct{}),
	}
	// The image origin: where the site's images come from before the cache has them. The
	// deploy image comes only once the lab releases it (release).
	mux := http.NewServeMux()
	for _, im := range []image{l.kernel, l.initrd, l.deploy} {
		data, held := im.data, im.name == l.deploy.name
		mux.HandleFunc("GET /images/"+im.name, func(w http.ResponseWriter, r *http.Request) {
			if held {
				select {
				case <-l.warm:
				case <-r.Context().Done():
					return
				}
			}
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
		})
	}
	if l.origin, err = serve(ctx, "127.0.0.1:0", mux); err != nil {
		return nil, err
	}
	// The TFTP root with the iPXE builds (generated stand-ins: the lab boots simulated
	// machines, not firmware).
	root := filepath.Join(dir, "tftp")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	for name, size := range map[string]int{"undionly.kpxe": 70 << 10, "ipxe.efi": 1 << 20, "ipxe-arm64.efi": 1 << 20} {
		im := newImage(name, size)
		if err := os.WriteFile(filepath.Join(root, name), im.data, 0o644); err != nil {
			return nil, err
		}
		l.builds[name] = im
	}

	// The site's CA, made now: it certifies the control plane and each agent's node key,
	// and the link between them is mutual TLS.
	if l.ca, err = sitetlstest.NewCA("bootlab site CA", nil); err != nil {
		return nil, err
	}
	l.caFile = filepath.Join(dir, "ca.pem")
	if err := l.ca.WriteFile(l.caFile); err != nil {
		return nil, err
	}
	server, err := l.ca.Issue(sitetlstest.Request{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		return nil, err
	}
	serverCert, serverKey := filepath.Join(dir, "control.pem"), filepath.Join(dir, "control.key")
	if err := server.WriteFiles(serverCert, serverKey); err != nil {
		return nil, err
	}
	creds, err := sitetls.Load(sitetls.Config{CertFile: serverCert, KeyFile: serverKey, CAFile: l.caFile, Logger: log.With("part", "control-plane")})
	if err != nil {
		return nil, err
	}

	// The control plane.
	l.plane = controlplane.New(log.With("part", "control-plane"))
	l.plane.TTL = leaseTTL
	l.plane.Interval = 250 * time.Millisecond
	l.plane.SessionTimeout = time.Second
	if l.planeURL, err = serveTLS(ctx, "127.0.0.1:0", l.plane.TLSServer(creds)); err != nil {
		return nil, err
	}
	go l.plane.Run(ctx)

	l.keys = assertion.StaticKeys{}
	l.verifier = &assertion.Verifier{
		Keys:   l.keys,
		Leases: l.plane.LeaseChecker(),
		Replay: &assertion.MemoryReplayCache{},
	}
	l.plane.SetImages(siteID, []sitelink.CacheImage{{URL: l.origin + "/images/" + l.deploy.name, SHA256: l.deploy.sha256, Format: "raw"}})
	return l, nil
}

// release lets the origin serve the deploy image.
func (l *lab) release() { l.releaseWarm.Do(func() { close(l.warm) }) }

// addAgent enrolls and starts a site agent on ip.
func (l *lab) addAgent(ctx context.Context, name string, ip netip.Addr) (*labAgent, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	any0 := netip.AddrPortFrom(ip, 0)
	cfg := agent.DefaultConfig()
	cfg.SiteID, cfg.NodeID, cfg.DataDir = siteID, name, filepath.Join(l.dir, name)
	cfg.Boot = agent.BootConfig{
		ProxyDHCP:  true,
		DHCPListen: any0,
		PXEListen:  any0,
		ServerIP:   ip,
		TFTP:       true,
		TFTPListen: any0,
		TFTPRoot:   filepath.Join(l.dir, "tftp"),
		HTTPListen: any0,
		Kernel:     agent.Image{URL: l.origin + "/images/" + l.kernel.name, SHA256: l.kernel.sha256, Format: "kernel"},
		Initrd:     agent.Image{URL: l.origin + "/images/" + l.initrd.name, SHA256: l.initrd.sha256, Format: "initrd"},
		Cmdline:    "console=ttyS0,115200n8 quiet",
		Params:     map[string]string{"gateway": "https://gateway.lab.example:443"},
		// The lab's image origin is on loopback, which the cache refuses unless allowed.
		AllowedSourceNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}
	cfg.Lease.TTL = leaseTTL
	// The agent's site certificate, for its node key, from the site's CA.
	cfg.KeyFile = filepath.Join(cfg.DataDir, "node.key")
	cfg.Control = agent.ControlConfig{
		URL: l.planeURL, Heartbeat: 250 * time.Millisecond, Timeout: time.Second,
		CertFile: filepath.Join(cfg.DataDir, "site.pem"), CAFile: l.caFile,
	}
	cfg.Metrics.Listen = any0
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, err
	}
	cert, err := l.ca.Issue(sitetlstest.Request{Node: sitetls.Identity{Site: siteID, Node: name}, Key: key})
	if err != nil {
		return nil, err
	}
	if err := cert.WriteFiles(cfg.Control.CertFile, cfg.KeyFile); err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(cert.KeyPEM), "\n") {
		if line != "" && !strings.HasPrefix(line, "-----") {
			l.secret(line) // the key's base64 body
		}
	}
	l.plane.Enroll(siteID, name)
	actx, stop := context.WithCancel(ctx)
	// No Link and no Signer: the agent loads its node key from its file and dials the
	// control plane over mutual TLS itself, as the siteagent command does.
	a, err := agent.New(actx, &cfg, nil, agent.Options{
		Logger: l.log.With("part", name), DHCPClientPort: clientPort, DrainTimeout: time.Second,
	})
	if err != nil {
		stop()
		return nil, err
	}
	la := &labAgent{name: name, ip: ip, a: a, stop: stop, done: make(chan error, 1), pubkey: key.Public().(ed25519.PublicKey), cfg: cfg}
	l.keys[name] = assertion.Agent{PublicKey: la.pubkey, Site: siteID, Role: assertion.RoleSite}
	l.agents = append(l.agents, la)
	go func() { la.done <- a.Run(actx) }()
	return la, nil
}

// tftpAddr maps an agent's address to its TFTP server.
func (l *lab) tftpAddr(server netip.Addr) netip.AddrPort {
	for _, a := range l.agents {
		if a.ip == server {
			return netip.MustParseAddrPort(a.a.Addrs()["tftp"])
		}
	}
	return netip.AddrPortFrom(server, 69)
}

// dhcpServers are where a machine's DHCP broadcast reaches: every agent's proxy.
func (l *lab) dhcpServers() []netip.AddrPort {
	var out []netip.AddrPort
	for _, a := range l.agents {
		out = append(out, netip.MustParseAddrPort(a.a.Addrs()["dhcp"]))
	}
	return out
}

func machineMAC(i int) hwid.MAC  { return hwid.MAC{0x52, 0x54, 0x00, 0x5b, byte(i >> 8), byte(i)} }
func machineIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 1, byte(i)}) }
func machineUUID(i int) hwid.UUID {
	u := hwid.UUID{0x4c, 0x4c, 0x45, 0x44, 0x00, 0x42, 0x10, 0x35, 0x80, 0x52}
	u[14], u[15] = byte(i>>8), byte(i)
	return u
}
