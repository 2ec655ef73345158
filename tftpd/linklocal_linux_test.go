package tftpd_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/tftpd"
)

// TestLinkLocalClient: curl downloads across a veth between two namespaces (root) from and
// to IPv6 link-local addresses, as a machine without a routable address does. The server
// runs inside the bridge's namespace (this test binary again, see serveChild), where the
// kernel's interface indexes and their names agree. Its transfer socket, on a thread of
// its own or in the network poller, reads the client's acknowledgements with the link
// given as an interface index; they must be taken as its client's (they were answered with
// error 5, unknown transfer ID, and the transfer timed out).
func TestLinkLocalClient(t *testing.T) {
	testpeer.LookPath(t, "curl", "curl")
	onBothPaths(t, testLinkLocalClient)
}

func testLinkLocalClient(t *testing.T, poller bool) {
	seg := testpeer.NewSegment(t, 1)
	host := seg.Hosts[0]
	seg.Bridge.Run(t, "ip", "addr", "add", "fe80::5b:1/64", "dev", "br0", "nodad")
	host.Run(t, "ip", "addr", "add", "fe80::5b:2/64", "dev", host.Iface, "nodad")

	dir := t.TempDir()
	data := payload(300_000, 11)
	writeFiles(t, dir, map[string][]byte{"ipxe.efi": data})
	p := testpeer.Start(t, testpeer.Cmd{
		Path: os.Args[0], Args: []string{"-test.run=^$"}, Netns: seg.Bridge,
		Env:      []string{childDir + "=" + dir, childAddr + "=[fe80::5b:1%br0]:0", childPoller + "=" + strconv.FormatBool(poller)},
		ReadyLog: `listening on port \d+`,
	})
	port := regexp.MustCompile(`listening on port (\d+)`).FindStringSubmatch(p.Output())[1]

	out := filepath.Join(t.TempDir(), "got")
	host.Run(t, "curl", "-sS", "--max-time", "60", "--tftp-blksize", "1468", "-o", out,
		fmt.Sprintf("tftp://[fe80::5b:1%%25%s]:%s/ipxe.efi", host.Iface, port))
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want the file's %d", len(got), len(data))
	}
	waitFor(t, "the server's report of the transfer", func() bool { return strings.Contains(p.Output(), "transfer ") })
	if want := "transfer ok from fe80::5b:2%br0"; !strings.Contains(p.Output(), want) {
		t.Fatalf("the server said:\n%s\nwant a line %q", p.Output(), want)
	}
}

// The environment that makes this test binary a server for TestLinkLocalClient.
const (
	childDir  = "SITEBOOT_TFTPD_TEST_SERVE_DIR"
	childAddr = "SITEBOOT_TFTPD_TEST_SERVE_ADDR"
	// "true": every transfer in the network poller (PollerOnly).
	childPoller = "SITEBOOT_TFTPD_TEST_SERVE_POLLER"
)

// serveChild, when the environment asks, serves its directory on its address until killed,
// printing the port and one line per transfer; it never returns then.
func serveChild() {
	dir := os.Getenv(childDir)
	if dir == "" {
		return
	}
	conn, err := net.ListenPacket("udp6", os.Getenv(childAddr))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	srv := &tftpd.Server{Dir: dir, OnTransfer: func(tr tftpd.Transfer) {
		fmt.Printf("transfer %s from %s, %d bytes, err %v\n", tr.Outcome, tr.Peer.Addr(), tr.Bytes, tr.Err)
	}}
	if os.Getenv(childPoller) == "true" {
		tftpd.PollerOnly(srv)
	}
	fmt.Println("listening on port " + strconv.Itoa(conn.LocalAddr().(*net.UDPAddr).Port))
	fmt.Println(srv.Serve(conn))
	os.Exit(1)
}
