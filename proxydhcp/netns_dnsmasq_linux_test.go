package proxydhcp_test

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// TestNetnsDnsmasqReference sends the same requests to our server and to dnsmasq in proxy mode
// (the reference proxy DHCP) on one segment and compares what firmware reads from both
// answers: message type, no address, option 60, option 97 echoed, where the reply goes (the
// broadcast port 68 for a client without an address; the relay's port 67 when relayed).
// Boot file names differ by configuration and are not compared. Needs root and dnsmasq.
func TestNetnsDnsmasqReference(t *testing.T) {
	dnsmasq := testpeer.LookPath(t, "dnsmasq", "dnsmasq")
	seg := testpeer.NewSegment(t, 3)
	ours, ref, client := seg.Hosts[0], seg.Hosts[1], seg.Hosts[2]

	testpeer.Start(t, testpeer.Cmd{
		Path: dnsmasq, Netns: ref.Netns,
		Args: []string{"--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--log-facility=-",
			"--interface=" + ref.Iface, "--bind-interfaces", "--dhcp-range=192.0.2.0,proxy",
			"--pxe-service=x86-64_EFI,siteboot,ipxe.efi", "--pxe-service=x86PC,siteboot,undionly.kpxe",
			"--dhcp-leasefile=" + t.TempDir() + "/leases", "--pid-file=" + t.TempDir() + "/pid", "--user=root"},
		ReadyLog: "proxy on subnet",
	})

	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll)}
	wait := serveInNetns(t, ours.Netns, srv)
	defer func() {
		srv.Close()
		wait()
	}()

	var c68, crelay, cboot net.PacketConn
	if err := client.Do(func() (err error) {
		if c68, err = net.ListenPacket("udp4", "0.0.0.0:68"); err != nil {
			return err
		}
		if cboot, err = net.ListenPacket("udp4", client.IP.String()+":4011"); err != nil {
			return err
		}
		crelay, err = net.ListenPacket("udp4", client.IP.String()+":67")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c68.Close()
	defer crelay.Close()
	defer cboot.Close()

	type seen struct {
		Type, YIAddr, GIAddr, Opt60, Opt97, To string
	}
	ask := func(t *testing.T, server net.IP, port int, conn net.PacketConn, pkt []byte, to string) seen {
		xid := binary.BigEndian.Uint32(pkt[4:8])
		buf := make([]byte, 1500)
		for try := 0; try < 3; try++ {
			if _, err := conn.WriteTo(pkt, &net.UDPAddr{IP: server, Port: port}); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			for {
				n, _, err := conn.ReadFrom(buf)
				if err != nil {
					break
				}
				m, err := dhcpv4.FromBytes(buf[:n])
				if err != nil || binary.BigEndian.Uint32(m.TransactionID[:]) != xid || !m.ServerIdentifier().Equal(server) {
					continue
				}
				return seen{
					Type: m.MessageType().String(), YIAddr: m.YourIPAddr.String(), GIAddr: m.GatewayIPAddr.String(),
					Opt60: m.ClassIdentifier(), Opt97: string(m.Options.Get(dhcpv4.OptionClientMachineIdentifier)), To: to,
				}
			}
		}
		t.Fatalf("no answer from %v", server)
		return seen{}
	}

	for _, tc := range []struct {
		name     string
		pkt      []byte
		conn     net.PacketConn
		port     int
		to, want string
	}{
		{"ovmf-pxe", ovmfPXE(t, "52:54:00:00:00:02"), c68, 67, "port 68", "OFFER"},
		{"seabios-ipxe", seabiosIPXE(t, "52:54:00:00:00:01"), c68, 67, "port 68", "OFFER"},
		{"ovmf-pxe-relayed", ovmfPXE(t, "52:54:00:00:00:07", dhcpv4.WithRelay(client.IP.AsSlice())), crelay, 67, "relay port 67", "OFFER"},
		{"ovmf-4011-from-4011", build(t, dhcpv4.MessageTypeRequest, "52:54:00:00:00:02", 0x5e6f7082,
			arch(7), undi(3, 0), vendorClass("PXEClient:Arch:00007:UNDI:003000"), uuidOpt(t, ovmfUUID),
			dhcpv4.WithClientIP(client.IP.AsSlice())), cboot, 4011, "source port 4011", "ACK"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := ask(t, ref.IP.AsSlice(), tc.port, tc.conn, tc.pkt, tc.to)
			got := ask(t, ours.IP.AsSlice(), tc.port, tc.conn, tc.pkt, tc.to)
			if want.Type != tc.want || want.YIAddr != "0.0.0.0" {
				t.Fatalf("dnsmasq answered %+v, want a proxy %s", want, tc.want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("dnsmasq (-) and proxydhcp (+) differ:\n%s", diff)
			}
		})
	}
}
