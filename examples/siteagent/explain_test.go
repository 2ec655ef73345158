package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bettercompute/siteboot/internal/testpeer"
)

// TestExplain: against a running agent that has no control plane (so it
// is fenced), "siteagent explain MAC" prints the diagnosis of a machine that asked over
// port 4011 and exits 0; for a MAC never seen it says so and exits 1.
func TestExplain(t *testing.T) {
	bin := buildAgent(t)
	dir := t.TempDir()
	metrics := fmt.Sprintf("127.0.0.1:%d", testpeer.FreePort(t, "tcp"))
	pxe := fmt.Sprintf("127.0.0.1:%d", testpeer.FreePort(t, "udp"))
	cfg := fencedConfig(dir, pxe, metrics)
	path := filepath.Join(dir, "agent.toml")
	os.WriteFile(path, []byte(cfg), 0o644)
	testpeer.Start(t, testpeer.Cmd{Path: bin, Args: []string{"-config", path}, ReadyTCP: metrics})

	mac := net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}
	req, err := dhcpv4.New(dhcpv4.WithHwAddr(mac), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1)),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003010")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp", pxe)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := explain(args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	// The request is handled as it arrives; a generous bound, which says nothing of speed.
	var code int
	var out string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c.Write(req.ToBytes())
		if code, out = run("-metrics", metrics, mac.String()); code == 0 || time.Now().After(deadline) {
			break
		}
	}
	if code != 0 || !strings.Contains(out, "fenced: this agent does not hold the boot lease") || !strings.Contains(out, "4011") {
		t.Errorf("explain of a machine the fenced agent saw: exit %d\n%s", code, out)
	}
	t.Logf("explain:\n%s", out)

	code, out = run("-metrics", metrics, "52:54:00:99:99:99")
	if code != 1 || !strings.Contains(out, "no DHCP request seen from this MAC") {
		t.Errorf("explain of a MAC never seen: exit %d, want 1\n%s", code, out)
	}
	// The config's metrics address, and a malformed MAC.
	if code, out = run("-config", path, mac.String()); code != 0 || !strings.Contains(out, "fenced") {
		t.Errorf("explain -config: exit %d\n%s", code, out)
	}
	if code, _ = run("-metrics", metrics, "not-a-mac"); code != 2 {
		t.Errorf("explain of a malformed MAC: exit %d, want 2", code)
	}
}
