//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// The agent's descriptor limit in the flood test, soft and hard: with connlimit's default
// reserve (256) and the metrics listener's share (32), its HTTP listener takes at most
// (600-256-32)/2 = 156 connections, of which a quarter (39) are kept for the machines it is
// booting (connlimit's reserve for preferred sources).
const (
	floodNOFILE  = 600
	floodSources = 48
	floodPer     = 15 // under the per-source cap (16): only the total cap stops them
)

// lab is a siteagent process linked over mutual TLS to an in-process control plane, with a
// CA made at start.
type binLab struct {
	plane   *controlplane.Plane
	proc    *testpeer.Process
	http    string
	pxe     netip.AddrPort
	tftp    netip.AddrPort
	metrics string
	mac     hwid.MAC
}

// startBinLab runs the siteagent binary under prlimit (RLIMIT_NOFILE nofile, soft and hard)
// and makes it the boot server with one entry.
func startBinLab(t *testing.T, nofile int) *binLab {
	t.Helper()
	bin := buildAgent(t)
	prlimit := testpeer.LookPath(t, "prlimit", "util-linux")
	dir := t.TempDir()
	key, err := agent.LoadOrCreateKey(filepath.Join(dir, "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "tls"), 0o700)
	link, err := sitetlstest.NewLink(filepath.Join(dir, "tls"), nil, sitetls.Identity{Site: "site-t", Node: "agent-t"}, key, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := sitetls.Load(link.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	l := &binLab{plane: controlplane.New(nil), mac: hwid.MustParseMAC("52:54:00:f1:00:01")}
	l.plane.TTL = 3 * time.Second
	l.plane.Enroll("site-t", "agent-t")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := l.plane.TLSServer(creds)
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	l.plane.PrepareRamdisk("agent-t", []sitelink.ProxyDhcpEntry{{MAC: l.mac, Arch: sitelink.ArchX86UEFI, Workflow: "wf-1", TokenRef: "tok-1", NotAfter: time.Now().Add(time.Hour)}})

	root := filepath.Join(dir, "tftp")
	os.MkdirAll(root, 0o755)
	os.WriteFile(filepath.Join(root, "ipxe.efi"), make([]byte, 4096), 0o644)
	port := func(network string) int { return testpeer.FreePort(t, network) }
	l.http = fmt.Sprintf("127.0.0.1:%d", port("tcp"))
	l.metrics = fmt.Sprintf("127.0.0.1:%d", port("tcp"))
	l.pxe = netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", port("udp")))
	l.tftp = netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", port("udp")))
	cfg := fmt.Sprintf(`
site_id = "site-t"
node_id = "agent-t"
data_dir = %q
key_file = %q
[log]
level = "debug"
[boot]
proxy_dhcp = true
dhcp_listen = "127.0.0.1:%d"
pxe_listen = %q
server_ip = "127.0.0.1"
tftp = true
tftp_listen = %q
tftp_root = %q
http_listen = %q
[boot.kernel]
url = "http://127.0.0.1:9/vmlinuz"
sha256 = "5fac891e7346c6a6820ab4ff0de1954eb4ba76de1f034545d8bcaf128bdbe80f"
[boot.initrd]
url = "http://127.0.0.1:9/initrd"
sha256 = "0128042d64cad309383b4779ec4290792b54daa97158e4c6126a57d2260042fe"
[lease]
ttl = "3s"
[control]
url = "https://%s"
heartbeat = "500ms"
cert = %q
ca = %q
[metrics]
listen = %q
`, filepath.Join(dir, "data"), filepath.Join(dir, "node.key"), port("udp"), l.pxe, l.tftp, root, l.http,
		ln.Addr(), link.AgentCert, link.CAFile, l.metrics)
	path := filepath.Join(dir, "agent.toml")
	os.WriteFile(path, []byte(cfg), 0o600)
	l.proc = testpeer.Start(t, testpeer.Cmd{
		Path: prlimit, Args: []string{fmt.Sprintf("--nofile=%d:%d", nofile, nofile), bin, "-config", path},
		ReadyTCP: l.metrics,
	})
	deadline := time.Now().Add(20 * time.Second)
	for len(l.plane.Pending("agent-t")) > 0 || !l.active(t) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never became the boot server with its entry\n%s", l.proc.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return l
}

func (l *binLab) active(t *testing.T) bool {
	resp, err := http.Get("http://" + l.metrics + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return strings.Contains(b.String(), "siteboot_lease_active 1")
}

// dhcpAnswered sends the entry's machine's PXE request to port 4011 and says whether an
// answer came within a few seconds.
func (l *binLab) dhcpAnswered(t *testing.T) error {
	_, err := l.dhcpAnswer(t, false)
	return err
}

// dhcpAnswer sends the entry's machine's request to port 4011, as its firmware (or, with
// ipxe, as its iPXE) does, from 127.0.0.1, and returns the answer.
func (l *binLab) dhcpAnswer(t *testing.T, ipxe bool) (*dhcpv4.DHCPv4, error) {
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, err := dhcpv4.New(
		dhcpv4.WithHwAddr(net.HardwareAddr(l.mac[:])),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1)),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if ipxe {
		req.UpdateOption(dhcpv4.OptUserClass("iPXE"))
	}
	buf := make([]byte, 1500)
	for range 3 {
		conn.WriteToUDPAddrPort(req.ToBytes(), l.pxe)
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			continue
		}
		if rep, err := dhcpv4.FromBytes(buf[:n]); err == nil && rep.TransactionID == req.TransactionID {
			return rep, nil
		}
	}
	return nil, fmt.Errorf("no proxy DHCP answer on %v", l.pxe)
}

// tftpAnswered reads the first block of ipxe.efi (RFC 1350, no options) and aborts.
func (l *binLab) tftpAnswered(t *testing.T) error {
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rrq := append([]byte{0, 1}, "ipxe.efi\x00octet\x00"...)
	buf := make([]byte, 1500)
	for range 3 {
		conn.WriteToUDPAddrPort(rrq, l.tftp)
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			continue
		}
		if n >= 4 && binary.BigEndian.Uint16(buf) == 3 && binary.BigEndian.Uint16(buf[2:]) == 1 {
			conn.WriteToUDPAddrPort(append([]byte{0, 5, 0, 0}, "done\x00"...), from)
			return nil
		}
		return fmt.Errorf("TFTP answered %x", buf[:min(n, 64)])
	}
	return fmt.Errorf("no TFTP answer on %v", l.tftp)
}

// TestHTTPFloodSparesTFTPAndDHCP: the siteagent process runs with 600 descriptors; 720
// keep-alive HTTP connections from 48 sources (15 each, under the per-source cap) are
// opened, each sends a request and then idles, as the attacker did. The HTTP
// listener holds at most its total cap and resets the rest, so TFTP (a socket and a file
// per transfer) and proxy DHCP still answer while the flood lasts.
func TestHTTPFloodSparesTFTPAndDHCP(t *testing.T) {
	l := startBinLab(t, floodNOFILE)
	if err := l.tftpAnswered(t); err != nil {
		t.Fatalf("before the flood: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	refused := 0
	for s := range floodSources {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 2, byte(10+s))}}
		for range floodPer {
			c, err := d.DialContext(ctx, "tcp", l.http)
			if err != nil {
				refused++
				continue
			}
			held = append(held, c)
			if _, err := c.Write([]byte("GET /boot/chain.ipxe HTTP/1.1\r\nHost: agent\r\n\r\n")); err != nil {
				refused++
			}
		}
	}
	// Give the agent a moment to accept (or reset) all of them.
	time.Sleep(time.Second)
	tftpStart := time.Now()
	if err := l.tftpAnswered(t); err != nil {
		t.Errorf("during the flood of %d connections: TFTP: %v", floodSources*floodPer, err)
	}
	tftpTook := time.Since(tftpStart)
	dhcpStart := time.Now()
	if err := l.dhcpAnswered(t); err != nil {
		t.Errorf("during the flood: DHCP: %v", err)
	}
	dhcpTook := time.Since(dhcpStart)
	resp, err := http.Get("http://" + l.metrics + "/metrics")
	if err != nil {
		t.Fatalf("metrics during the flood: %v", err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("metrics during the flood: %v", err)
	}
	body := string(raw)
	// The flood takes every connection but the reserve kept for machines being booted.
	if !strings.Contains(body, `siteboot_http_connections_open{listener="http"} 117`) {
		t.Errorf("want the HTTP listener at 156 open connections less its reserve of 39:\n%s", grepLines(body, "siteboot_http_connections"))
	}
	if strings.Contains(l.proc.Output(), "too many open files") {
		t.Errorf("the agent ran out of descriptors:\n%s", grepLines(l.proc.Output(), "too many open files"))
	}
	t.Logf("%d connections dialled, %d reset before a request went out; TFTP's first block in %v, DHCP's answer in %v; %s",
		floodSources*floodPer, refused, tftpTook.Round(time.Millisecond), dhcpTook.Round(time.Millisecond), grepLines(body, "siteboot_http_connections"))
}

func grepLines(text, s string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestHTTPFloodSparesAnsweredMachine: 10 sources open 16 keep-alive connections each (160,
// more than the HTTP listener's 156), so no connection is left for anyone else; the machine
// proxy DHCP has just answered still gets its script, on the room the listener keeps for
// the sources it is booting, while a new source is refused.
func TestHTTPFloodSparesAnsweredMachine(t *testing.T) {
	l := startBinLab(t, floodNOFILE)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for s := range 10 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 3, byte(10+s))}}
		for range 16 {
			c, err := d.DialContext(ctx, "tcp", l.http)
			if err != nil {
				continue
			}
			held = append(held, c)
			c.Write([]byte("GET /boot/chain.ipxe HTTP/1.1\r\nHost: agent\r\n\r\n"))
		}
	}
	time.Sleep(time.Second) // the agent accepts (or resets) them all
	// A source the agent never answered is refused now.
	stranger := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 4, 1)}}).DialContext}}
	if resp, err := stranger.Get("http://" + l.http + "/boot/chain.ipxe"); err == nil {
		resp.Body.Close()
		t.Errorf("a source that was never answered got %s during the flood, want a reset", resp.Status)
	}

	// The machine: proxy DHCP answers its iPXE with the chain URL and its nonce, and the
	// script request from the address it answered gets through.
	rep, err := l.dhcpAnswer(t, true)
	if err != nil {
		t.Fatal(err)
	}
	u := rep.BootFileName
	if u == "" {
		u = string(rep.Options.Get(dhcpv4.OptionBootfileName))
	}
	if !strings.HasPrefix(u, "http://") {
		t.Fatalf("iPXE's answer names %q, want the chain URL", u)
	}
	machine := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := machine.Get(u)
	if err != nil {
		t.Fatalf("the answered machine's script during the flood: %v", err)
	}
	b := make([]byte, 64)
	n, _ := resp.Body.Read(b)
	resp.Body.Close()
	if !strings.HasPrefix(string(b[:n]), "#!ipxe") {
		t.Errorf("the answered machine got %s %q, want its script", resp.Status, b[:n])
	}
	mresp, err := http.Get("http://" + l.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	body := string(raw)
	for _, want := range []string{`siteboot_http_connections_preferred_total{listener="http"} `, `siteboot_http_connections_refused_total{cap="reserve",listener="http"} `} {
		line := grepLines(body, want)
		if line == "" || strings.HasSuffix(line, " 0") {
			t.Errorf("metrics: want %s above 0:\n%s", want, grepLines(body, "siteboot_http_connections"))
		}
	}
}
