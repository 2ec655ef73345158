package proxydhcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/google/go-cmp/cmp"
)

const (
	ovmfCode    = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars    = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	ovmf6MAC    = "52:54:00:00:00:66"
	ovmf6UUID   = "6b1f0a52-93c4-4e3e-8c4b-2b0d6a1f5c66"
	tftpRRQ     = 1
	tftpErrFile = 1
)

// TestQEMU_OVMFIPv6PXE boots real EDK2 (Debian's OVMF, IPv4 PXE off) on an IPv6-only segment
// where dnsmasq sends router advertisements and gives addresses by DHCPv6 (the site's
// server) and this package's server is a second host: OVMF must take the proxy ADVERTISE,
// ask this server again on UDP 4011 after dnsmasq's REPLY, and then read the boot file it
// was named over TFTP from the address named (the test's TFTP listener sees the read
// request and refuses it, which ends the attempt). The machine has an SMBIOS UUID, so its
// DUID is a DUID-UUID: the MAC must come from its EUI-64 link-local address (and, for the
// 4011 request from its new address, from the ADVERTISE this server sent it) and the UUID
// from the DUID. With -update the exchange is kept as testdata/ovmf-ipv6-pxe.pcap for
// TestGoldenOVMFIPv6Capture. Needs root, QEMU, OVMF, dnsmasq and tcpdump.
func TestQEMU_OVMFIPv6PXE(t *testing.T) { ovmfIPv6(t, false) }

// TestQEMU_OVMFIPv6HTTPBoot is the same with OVMF's PXE off (IPv4 and IPv6): its IPv6 HTTP
// boot must take the HTTPClient ADVERTISE (no second request) and ask the URL named,
// http://[2001:db8::10]/boot/files/ipxe.efi, of the test's HTTP server there. Needs root,
// QEMU, OVMF, dnsmasq and tcpdump.
func TestQEMU_OVMFIPv6HTTPBoot(t *testing.T) { ovmfIPv6(t, true) }

func ovmfIPv6(t *testing.T, httpBoot bool) {
	qemu := testpeer.LookPath(t, "qemu-system-x86_64", "qemu-system-x86")
	dnsmasq := testpeer.LookPath(t, "dnsmasq", "dnsmasq")
	tcpdump := testpeer.LookPath(t, "tcpdump", "tcpdump")
	for _, f := range []string{ovmfCode, ovmfVars} {
		testpeer.File(t, f, "ovmf")
	}
	dir := t.TempDir()
	vars, err := os.ReadFile(ovmfVars)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/vars.fd", vars, 0o644); err != nil {
		t.Fatal(err)
	}

	seg := testpeer.NewSegment(t, 2)
	agent, site := seg.Hosts[0], seg.Hosts[1]
	agent.Run(t, "ip", "addr", "add", agent6+"/64", "dev", "eth0", "nodad")
	site.Run(t, "ip", "addr", "add", "2001:db8::1/64", "dev", "eth0", "nodad")
	waitDAD(t, agent.Netns)
	waitDAD(t, site.Netns)
	tap := seg.AddTap(t, "tap0")

	testpeer.Start(t, testpeer.Cmd{
		Path: dnsmasq, Netns: site.Netns,
		Args: []string{"--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--log-facility=-", "--log-dhcp",
			"--interface=eth0", "--bind-interfaces", "--enable-ra", "--dhcp-range=2001:db8::100,2001:db8::1ff,64,1h",
			"--dhcp-leasefile=" + dir + "/leases", "--pid-file=" + dir + "/pid", "--user=root"},
		ReadyLog: "DHCPv6",
	})
	pcap := filepath.Join(dir, ovmf6Pcap)
	dump := testpeer.Start(t, testpeer.Cmd{
		Path: tcpdump, Netns: agent.Netns,
		Args:     []string{"-i", "eth0", "-U", "-n", "-s", "0", "-w", pcap, "udp and (port 546 or port 547 or port 4011)"},
		ReadyLog: "listening on",
	})

	// The TFTP server: it records the first read request and refuses it.
	var tftp net.PacketConn
	if err := agent.Do(func() (err error) { tftp, err = net.ListenPacket("udp6", "[::]:69"); return err }); err != nil {
		t.Fatal(err)
	}
	defer tftp.Close()
	rrq := make(chan string, 1)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := tftp.ReadFrom(buf)
			if err != nil {
				return
			}
			if n > 4 && binary.BigEndian.Uint16(buf) == tftpRRQ {
				name, _, _ := bytes.Cut(buf[2:n], []byte{0})
				select {
				case rrq <- string(name):
				default:
				}
				refuse := append(binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 5), tftpErrFile), "not here\x00"...)
				tftp.WriteTo(refuse, from)
			}
		}
	}()

	// The HTTP server: it records the first path asked and answers 404.
	var hl net.Listener
	if err := agent.Do(func() (err error) { hl, err = net.Listen("tcp6", "[::]:80"); return err }); err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 1)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- r.Method + " " + r.URL.Path:
		default:
		}
		http.NotFound(w, r)
	})}
	go hs.Serve(hl)
	defer hs.Close()

	var mu sync.Mutex
	var seen []string
	srv := &proxydhcp.Server{
		ServerDUID: serverDUID,
		ServerIP6:  netip.MustParseAddr(agent6), // the sockets live in a namespace the process is not in
		Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
			mu.Lock()
			seen = append(seen, r.Type.String()+" "+r.Port.String()+" "+r.MAC.String()+" "+r.MACSource.String()+" "+r.UUID.String()+" "+r.Arch.String())
			mu.Unlock()
			return proxydhcp.Answer()
		}),
	}
	wait := serve6InNetns(t, agent.Netns, srv)
	defer func() {
		srv.Close()
		wait()
	}()

	serial := filepath.Join(dir, "serial.log")
	fwcfg := []string{"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=no"}
	if httpBoot {
		fwcfg = append(fwcfg, "-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no")
	}
	vm := testpeer.Start(t, testpeer.Cmd{
		Path: qemu, Netns: seg.Bridge,
		Args: append(append([]string{
			"-accel", "tcg", "-M", "q35", "-m", "256", "-nodefaults", "-display", "none",
			"-machine", "graphics=off", "-serial", "file:" + serial, "-no-reboot", "-uuid", ovmf6UUID,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + ovmfCode,
			"-drive", "if=pflash,format=raw,unit=1,file=" + dir + "/vars.fd",
		}, fwcfg...),
			"-netdev", "tap,id=n0,ifname="+tap+",script=no,downscript=no",
			"-device", "virtio-net-pci,netdev=n0,mac="+ovmf6MAC+",romfile=,bootindex=1",
			"-boot", "n",
		),
	})

	var fetched, wantFetched string
	wantFetched = "TFTP ipxe.efi"
	if httpBoot {
		wantFetched = "HEAD /boot/files/ipxe.efi" // UefiHttpBoot asks the size first
	}
	select {
	case f := <-rrq:
		fetched = "TFTP " + f
	case f := <-asked:
		fetched = f
	case <-vm.Done():
	case <-time.After(4 * time.Minute):
	}
	vm.Stop()
	out, _ := os.ReadFile(serial)
	if fetched != wantFetched {
		t.Fatalf("fetched %q, want %q; stats %+v / %+v; serial:\n%s", fetched, wantFetched, srv.Stats().DHCPv6, srv.Stats().Boot, out)
	}
	st := srv.Stats()
	if st.DHCPv6.Answered < 1 || (!httpBoot && st.Boot.Answered < 1) {
		t.Errorf("stats: DHCPv6 %+v, 4011 %+v: want the ADVERTISE (and for PXE the boot-server REPLY)", st.DHCPv6, st.Boot)
	}
	// EDK2 copies the SMBIOS UUID as an EFI_GUID: its first three fields byte-swapped.
	u := hwid.MustParseUUID(ovmf6UUID).SMBIOS()
	want := []string{
		"SOLICIT 547 " + ovmf6MAC + " link-local-eui64 " + u.String() + " x86_64-efi",
		"REQUEST 4011 " + ovmf6MAC + " link-local-eui64 " + u.String() + " x86_64-efi",
	}
	if httpBoot {
		want = []string{"SOLICIT 547 " + ovmf6MAC + " link-local-eui64 " + u.String() + " x86_64-efi-http"}
	}
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	if len(got) > len(want) {
		got = got[:len(want)] // OVMF may solicit again while the download fails
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the handler saw (-want +got):\n%s", diff)
	}
	time.Sleep(200 * time.Millisecond) // tcpdump -U writes each packet as it goes
	dump.Stop()
	if *update && !httpBoot {
		b, err := os.ReadFile(pcap)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", ovmf6Pcap), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
