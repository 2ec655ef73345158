package testpeer

import (
	"archive/tar"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Archives of the Redfish emulators, kept in testdata/peers beside this file (the Python
// package index is not reachable from CI; their dependencies come from Debian).
const (
	SushyToolsArchive   = "sushy-tools-2.2.0.tar.gz"           // OpenStack sushy-tools, Apache-2.0
	MockupServerArchive = "Redfish-Mockup-Server-1.2.6.tar.gz" // DMTF Redfish-Mockup-Server, BSD-3-Clause
)

// redfishDebs are the Debian packages the two emulators import, by Python module.
var redfishDebs = map[string]string{
	"flask":    "python3-flask",
	"requests": "python3-requests",
	"tenacity": "python3-tenacity",
	"bcrypt":   "python3-bcrypt",
	"webob":    "python3-webob",
}

// PeerArchive returns the path of one of the archives in testdata/peers.
func PeerArchive(t testing.TB, name string) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testpeer: cannot locate the package's source folder")
	}
	p := filepath.Join(filepath.Dir(file), "testdata", "peers", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("testpeer: peer archive %s: %v", name, err)
	}
	return p
}

// python returns Debian's python3 (the one its python3-* packages install into) after
// checking that the modules exist, or skips (fails when Required) naming the packages.
func python(t testing.TB, modules ...string) string {
	t.Helper()
	py := LookPath(t, "python3", "python3")
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		py = "/usr/bin/python3"
	}
	var missing []string
	for _, m := range modules {
		if !pythonHas(py, m, redfishDebs[m]) {
			missing = append(missing, redfishDebs[m])
		}
	}
	if len(missing) > 0 {
		Unavailable(t, "%s lacks Python modules: install the Debian packages %s", py, strings.Join(missing, " "))
	}
	return py
}

// PythonModule skips (fails when Required) unless the Python interpreter py imports module,
// naming debPkg, the Debian package that provides it; HideEnv hides it by module or package.
func PythonModule(t testing.TB, py, module, debPkg string) {
	t.Helper()
	if !pythonHas(py, module, debPkg) {
		Unavailable(t, "%s cannot import %s: install the Debian package %s", py, module, debPkg)
	}
}

// pythonHas reports whether py imports module and HideEnv hides neither it nor debPkg.
func pythonHas(py, module, debPkg string) bool {
	if hiddenName(module, debPkg) {
		return false
	}
	return exec.Command(py, "-c", "import "+module).Run() == nil
}

// untar extracts a .tar.gz into dir, refusing paths that leave it.
func untar(t testing.TB, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatalf("testpeer: %v", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("testpeer: %s: %v", archive, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("testpeer: %s: %v", archive, err)
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			t.Fatalf("testpeer: %s: entry %q leaves the folder", archive, h.Name)
		}
		dst := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
				var out *os.File
				if out, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
					_, err = io.Copy(out, io.LimitReader(tr, 64<<20))
					if cerr := out.Close(); err == nil {
						err = cerr
					}
				}
			}
		}
		if err != nil {
			t.Fatalf("testpeer: extract %s: %v", h.Name, err)
		}
	}
}

// TLSFiles is a self-signed certificate for 127.0.0.1 written to disk for a peer.
type TLSFiles struct {
	CertFile, KeyFile string
	// Cert is the certificate (DER); SHA256 its digest, for pinning.
	Cert   []byte
	SHA256 []byte
}

// SelfSignedTLS writes a fresh ECDSA P-256 certificate for 127.0.0.1 and ::1 into dir.
func SelfSignedTLS(t testing.TB, dir string) TLSFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "testpeer BMC"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := TLSFiles{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), Cert: der}
	sum := sha256.Sum256(der)
	f.SHA256 = sum[:]
	if err := os.WriteFile(f.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// SushySystem is one machine of sushy-emulator's fake driver.
type SushySystem struct {
	UUID string
	Name string
	// PowerState is "On" or "Off" (default "Off").
	PowerState string
	// NICs are MAC and IPv4 address pairs.
	NICs [][2]string
}

// SushyConfig configures SushyEmulator.
type SushyConfig struct {
	// Systems of the fake driver; empty means one system, DefaultSushySystem.
	Systems []SushySystem
	// Username and Password, when set, turn on HTTP basic auth (sushy's only login: it
	// has no SessionService) with a bcrypt htpasswd file.
	Username, Password string
	// TLS serves HTTPS with a fresh self-signed certificate (Sushy.TLS holds it).
	TLS bool
	// Extra is appended to the emulator's Python config file.
	Extra string
	// Netns runs the emulator inside that network namespace, listening on Addr there (a
	// BMC's address on a segment the test made); nil means the test's own namespace, on
	// 127.0.0.1. Addr must be set with Netns. The TLS certificate names 127.0.0.1 and ::1
	// only: reach Addr over TLS with the certificate pinned (Sushy.TLS.SHA256).
	Netns *Netns
	Addr  netip.Addr
	// LibvirtURI, when set, runs the emulator's libvirt driver against that daemon (its
	// domains are the systems; Systems is ignored) in place of the fake driver. It then
	// also needs Debian's python3-libvirt.
	LibvirtURI string
}

// DefaultSushySystem is the fake system SushyEmulator starts when none is given.
var DefaultSushySystem = SushySystem{
	UUID: "27946b59-9e44-4fa7-8e91-f3527a1ef094", Name: "fake", PowerState: "Off",
	NICs: [][2]string{{"00:5c:52:31:3a:9c", "192.0.2.100"}},
}

// Sushy is a running sushy-emulator.
type Sushy struct {
	// URL is http://127.0.0.1:PORT (https:// with TLS), or Addr in place of 127.0.0.1.
	URL     string
	TLS     TLSFiles
	Process *Process
}

// SushyEmulator starts OpenStack's sushy-emulator with its fake driver (no VM, no root)
// from the archive in testdata/peers, extracted into a temporary folder, on a free
// loopback port, and stops it at cleanup. It skips (fails when Required) when Debian's
// python3 lacks the modules it imports.
func SushyEmulator(t testing.TB, cfg SushyConfig) *Sushy {
	t.Helper()
	py := python(t, "flask", "requests", "tenacity", "bcrypt", "webob")
	if cfg.LibvirtURI != "" {
		PythonModule(t, py, "libvirt", "python3-libvirt")
	}
	dir := t.TempDir()
	untar(t, PeerArchive(t, SushyToolsArchive), dir)
	src := filepath.Join(dir, strings.TrimSuffix(SushyToolsArchive, ".tar.gz"))
	systems := cfg.Systems
	if len(systems) == 0 {
		systems = []SushySystem{DefaultSushySystem}
	}
	host := "127.0.0.1"
	if cfg.Netns != nil {
		if !cfg.Addr.IsValid() {
			t.Fatal("testpeer: SushyConfig.Netns without an Addr")
		}
		host = cfg.Addr.String()
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "SUSHY_EMULATOR_LISTEN_IP = %s\n", pyStr(host))
	if cfg.LibvirtURI != "" {
		fmt.Fprintf(&conf, "SUSHY_EMULATOR_LIBVIRT_URI = %s\n", pyStr(cfg.LibvirtURI))
	} else {
		conf.WriteString("SUSHY_EMULATOR_FAKE_DRIVER = True\n")
	}
	// The emulator keeps its systems, media and volumes in SQLite files, by default in
	// /tmp/sushy-emulator, shared by every emulator on the machine: each one would then
	// serve the systems (and power states) of all that ran before it. Its own folder.
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&conf, "SUSHY_EMULATOR_STATE_DIR = %s\n", pyStr(state))
	if cfg.LibvirtURI != "" {
		systems = nil
	} else {
		conf.WriteString("SUSHY_EMULATOR_FAKE_SYSTEMS = [\n")
	}
	for _, s := range systems {
		ps := s.PowerState
		if ps == "" {
			ps = "Off"
		}
		fmt.Fprintf(&conf, "  {'uuid': %s, 'name': %s, 'power_state': %s, 'external_notifier': False, 'nics': [",
			pyStr(s.UUID), pyStr(s.Name), pyStr(ps))
		for _, n := range s.NICs {
			fmt.Fprintf(&conf, "{'mac': %s, 'ip': %s}, ", pyStr(n[0]), pyStr(n[1]))
		}
		conf.WriteString("]},\n")
	}
	if cfg.LibvirtURI == "" {
		conf.WriteString("]\n")
	}
	if cfg.Username != "" {
		hash, err := exec.Command(py, "-c",
			"import bcrypt,sys; print(bcrypt.hashpw(sys.argv[1].encode(), bcrypt.gensalt(rounds=4)).decode())",
			cfg.Password).Output()
		if err != nil {
			t.Fatalf("testpeer: bcrypt the sushy password: %v", err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(cfg.Username+":"+strings.TrimSpace(string(hash))+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "SUSHY_EMULATOR_AUTH_FILE = %s\n", pyStr(htpasswd))
	}
	conf.WriteString(cfg.Extra + "\n")
	confFile := filepath.Join(dir, "sushy.conf")
	if err := os.WriteFile(confFile, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t, "tcp")
	argv := []string{py, "-m", "sushy_tools.emulator.main", "--config", confFile, "-p", strconv.Itoa(port)}
	hostPort := net.JoinHostPort(host, strconv.Itoa(port))
	s := &Sushy{URL: "http://" + hostPort}
	if cfg.TLS {
		s.TLS = SelfSignedTLS(t, dir)
		argv = append(argv, "--ssl-certificate", s.TLS.CertFile, "--ssl-key", s.TLS.KeyFile)
		s.URL = "https://" + hostPort
	}
	s.Process = Start(t, Cmd{
		Path: argv[0], Args: argv[1:], Dir: src,
		// pbr reads the version from git or from this variable; the source runs in place.
		Env:          []string{"PYTHONPATH=" + src, "PBR_VERSION=2.2.0", "PYTHONDONTWRITEBYTECODE=1"},
		Netns:        cfg.Netns,
		ReadyTCP:     hostPort,
		ReadyTimeout: 30 * time.Second,
	})
	return s
}

// MockupServer is a running DMTF Redfish-Mockup-Server.
type MockupServer struct {
	// URL is http://127.0.0.1:PORT.
	URL     string
	Process *Process
}

// RedfishMockupServer starts DMTF's Redfish-Mockup-Server (from the archive in
// testdata/peers) serving the mockup folder dir, whose index.json answers GET
// /redfish/v1/ (the server's short form, -S). The server keeps PATCHes and POSTs in memory
// and accepts any credentials. It imports grequests only to push events: a stand-in
// module takes its place. Stopped at cleanup.
func RedfishMockupServer(t testing.TB, dir string) *MockupServer {
	t.Helper()
	py := python(t, "requests")
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		t.Fatalf("testpeer: %s is not a mockup folder: %v", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	untar(t, PeerArchive(t, MockupServerArchive), work)
	src := filepath.Join(work, strings.TrimSuffix(MockupServerArchive, ".tar.gz"))
	stub := filepath.Join(work, "stub")
	if err := os.MkdirAll(stub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stub, "grequests.py"),
		[]byte("def post(*a, **k):\n    return None\n\n\ndef map(*a, **k):\n    return []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t, "tcp")
	p := Start(t, Cmd{
		Path: py, Args: []string{filepath.Join(src, "redfishMockupServer.py"),
			"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-S", "-D", abs}, Dir: src,
		Env:          []string{"PYTHONPATH=" + stub, "PYTHONDONTWRITEBYTECODE=1"},
		ReadyTCP:     "127.0.0.1:" + strconv.Itoa(port),
		ReadyTimeout: 30 * time.Second,
	})
	return &MockupServer{URL: "http://127.0.0.1:" + strconv.Itoa(port), Process: p}
}

// pyStr quotes s as a Python string literal.
func pyStr(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}
