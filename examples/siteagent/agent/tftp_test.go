package agent_test

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"strings"
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
		cfg.Boot.TFTPLimits.MaxWindow = tc.max
		cfg.Boot.TFTPLimits.FirstRetries = 1
		cfg.Boot.TFTPLimits.EvictAfter = 20 * time.Millisecond
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

// TestTFTPQueueSettings: boot.tftp_max_queued reaches the agent's TFTP server. With its one
// slot taken by a transfer under way (acknowledged, so not evictable), a second request
// waits, seen in tftp_waiting and tftp_queued, and is served as soon as the slot frees up;
// with tftp_max_queued = -1 it is dropped unanswered (tftp_dropped_busy).
func TestTFTPQueueSettings(t *testing.T) {
	for _, tc := range []struct {
		maxQueued int
		queued    bool
	}{{0, true}, {-1, false}} {
		h := newHarness(t)
		cfg := h.config(t.TempDir())
		cfg.Boot.TFTPLimits.MaxTransfers, cfg.Boot.TFTPLimits.MaxPerSource = 1, 1
		cfg.Boot.TFTPLimits.MaxQueued = tc.maxQueued
		cfg.Boot.TFTPLimits.QueueWait = 10 * time.Second
		a, stop := h.start(t, cfg, h.plane.Link())
		server := netip.MustParseAddrPort(a.Addrs()["tftp"])
		rrq := []byte("\x00\x01ipxe.efi\x00octet\x00")
		abort := []byte("\x00\x05\x00\x00done\x00")
		client := func(ip string) *net.UDPConn {
			c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), 0)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
		buf := make([]byte, 600)
		read := func(c *net.UDPConn, what string) netip.AddrPort {
			t.Helper()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil || n < 4 || buf[1] != 3 {
				t.Fatalf("maxQueued %d: %s: %d bytes (opcode %d), %v", tc.maxQueued, what, n, buf[1], err)
			}
			return from
		}

		metrics := func(want ...string) {
			t.Helper()
			_, body := get(t, "http://"+a.Addrs()["metrics"]+"/metrics")
			for _, w := range want {
				if !slices.Contains(strings.Split(body, "\n"), w) {
					t.Errorf("maxQueued %d: no %q in the metrics", tc.maxQueued, w)
				}
			}
		}
		// Two machines: one slot, one per source.
		first := client("127.0.0.2")
		first.WriteToUDPAddrPort(rrq, server)
		tid := read(first, "the first transfer's block 1")
		first.WriteToUDPAddrPort([]byte{0, 4, 0, 1}, tid)
		read(first, "the first transfer's block 2") // acknowledged: it keeps its slot

		second := client("127.0.0.3")
		second.WriteToUDPAddrPort(rrq, server)
		if !tc.queued {
			waitFor(t, "the second request dropped", func() bool { return a.Stats()["tftp_dropped_busy"] == 1 })
			if st := a.Stats(); st["tftp_queued"] != 0 || st["tftp_waiting"] != 0 {
				t.Errorf("tftp_max_queued -1: queued %d, waiting %d", st["tftp_queued"], st["tftp_waiting"])
			}
			metrics(`siteboot_tftp_dropped_total{limit="busy"} 1`, `siteboot_tftp_queued_total 0`)
			first.WriteToUDPAddrPort(abort, tid)
			stop()
			continue
		}
		waitFor(t, "the second request held", func() bool {
			st := a.Stats()
			return st["tftp_waiting"] == 1 && st["tftp_queued"] == 1
		})
		metrics(`siteboot_tftp_waiting 1`, `siteboot_tftp_queued_total 1`, `siteboot_tftp_evicted_total 0`)
		first.WriteToUDPAddrPort(abort, tid) // the first client gives up
		tid2 := read(second, "the held request's block 1")
		if st := a.Stats(); st["tftp_waiting"] != 0 || st["tftp_dropped_busy"] != 0 {
			t.Errorf("after the slot freed up: waiting %d, dropped %d", st["tftp_waiting"], st["tftp_dropped_busy"])
		}
		second.WriteToUDPAddrPort(abort, tid2)
		stop()
	}
}
