package testpeer_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
)

// TestBridgeKeepsItsMACWhenAPortJoins: a tap with a MAC lower than every port's joins the
// bridge (as a QEMU machine's tap may); the bridge keeps its MAC, and hosts that spoke to
// the bridge's address before still reach it at once. A bridge left to pick its MAC takes
// the tap's, and the hosts on other ports lose its address until their neighbour entry is
// probed again, tens of seconds later.
func TestBridgeKeepsItsMACWhenAPortJoins(t *testing.T) {
	seg := testpeer.NewSegment(t, 2)
	br := seg.Bridge
	var ln net.Listener
	if err := br.Do(func() (err error) {
		ln, err = net.Listen("tcp4", testpeer.BridgeIP.String()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := func(h *testpeer.Host) error {
		return h.Do(func() error {
			c, err := net.DialTimeout("tcp4", ln.Addr().String(), 2*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	for _, h := range seg.Hosts {
		if err := dial(h); err != nil {
			t.Fatalf("%s before the tap joined: %v", h.IP, err)
		}
	}
	br.Run(t, "ip", "tuntap", "add", "dev", "tap9", "mode", "tap")
	br.Run(t, "ip", "link", "set", "tap9", "address", "02:00:00:00:00:01")
	br.Run(t, "ip", "link", "set", "tap9", "master", "br0", "up")
	if out := br.Run(t, "ip", "-br", "link", "show", "br0"); !strings.Contains(out, testpeer.BridgeMAC) {
		t.Errorf("br0 after the tap joined: %s; want its MAC %s kept", strings.TrimSpace(out), testpeer.BridgeMAC)
	}
	for _, h := range seg.Hosts {
		if err := dial(h); err != nil {
			t.Errorf("%s after the tap joined: %v", h.IP, err)
		}
	}
}
