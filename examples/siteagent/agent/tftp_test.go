package agent_test

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestTFTPSettings: boot.tftp_max_window reaches the agent's TFTP server. OVMF asks
// windowsize 4; a client asking 8 gets 8 by default and the configured maximum when it is
// set lower (RFC 7440: the server may answer a smaller window).
func TestTFTPSettings(t *testing.T) {
	for _, tc := range []struct {
		max  int
		want string
	}{{0, "8"}, {2, "2"}} {
		h := newHarness(t)
		cfg := h.config(t.TempDir())
		cfg.Boot.TFTPMaxWindow = tc.max
		cfg.Boot.TFTPFirstRetries = 1
		cfg.Boot.TFTPEvictAfter = 20 * time.Millisecond
		a, stop := h.start(t, cfg, h.plane.Link())
		if got := oackWindow(t, netip.MustParseAddrPort(a.Addrs()["tftp"]), "ipxe.efi", "8"); got != tc.want {
			t.Errorf("tftp_max_window %d: a request for windowsize 8 was granted %q, want %q", tc.max, got, tc.want)
		}
		stop()
	}
}

// oackWindow asks server for name with windowsize ask and returns the windowsize of its OACK
// ("" for an answer without one). It then aborts the transfer, as OVMF does after its size
// probe.
func oackWindow(t *testing.T, server netip.AddrPort, name, ask string) string {
	t.Helper()
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rrq := append([]byte{0, 1}, name+"\x00octet\x00windowsize\x00"+ask+"\x00"...)
	if _, err := conn.WriteToUDPAddrPort(rrq, server); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, peer, err := conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("no answer to a read request for %s: %v", name, err)
	}
	conn.WriteToUDPAddrPort([]byte("\x00\x05\x00\x08\x00"), peer) // error 8: option refused, abort
	if buf[0] != 0 || buf[1] != 6 {
		t.Fatalf("answer opcode %d, want an OACK (6)", buf[1])
	}
	opts := bytes.Split(bytes.TrimSuffix(buf[2:n], []byte{0}), []byte{0})
	for i := 0; i+1 < len(opts); i += 2 {
		if string(opts[i]) == "windowsize" {
			return string(opts[i+1])
		}
	}
	return ""
}
