package tftpd_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testlog"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/tftpd"
)

// copyFile copies src (following symbolic links) to dst.
func copyFile(t *testing.T, src, dst string) []byte {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		testpeer.Unavailable(t, "%s: %v", src, err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOVMFFirmwareQEMURoot boots real EDK2 firmware (OVMF under QEMU, TCG) on an isolated
// segment: dnsmasq hands out an address and names ipxe.efi on 192.0.2.1, and our server,
// bound in the segment's namespace, serves Debian's iPXE build to it. EDK2 asks with tsize,
// blksize 1468 and windowsize 4, aborts after the option acknowledgement and asks again:
// the first request must end aborted, the second must deliver the whole file in windows of
// 4 (RFC 7440, acknowledged in the OACK).
// Needs root, qemu-system-x86, ovmf, ipxe and dnsmasq.
func TestOVMFFirmwareQEMURoot(t *testing.T) {
	testpeer.RequireRoot(t)
	qemu := testpeer.LookPath(t, "qemu-system-x86_64", "qemu-system-x86")
	dnsmasq := testpeer.LookPath(t, "dnsmasq", "dnsmasq")
	code := testpeer.File(t, "/usr/share/OVMF/OVMF_CODE_4M.fd", "ovmf")
	testpeer.File(t, "/usr/share/OVMF/OVMF_VARS_4M.fd", "ovmf")
	testpeer.File(t, "/usr/lib/ipxe/ipxe.efi", "ipxe")
	tmp := t.TempDir()
	root := filepath.Join(tmp, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// Debian's /usr/lib/ipxe/ipxe.efi is a symbolic link out of that directory (to /boot),
	// which a root of /usr/lib/ipxe would rightly refuse: serve a copy.
	efi := copyFile(t, "/usr/lib/ipxe/ipxe.efi", filepath.Join(root, "ipxe.efi"))
	copyFile(t, "/usr/share/OVMF/OVMF_VARS_4M.fd", filepath.Join(tmp, "vars.fd"))

	seg := testpeer.NewSegment(t, 0)
	tap := seg.AddTap(t, "tap0")

	rec := newRecorder()
	var logBuf testlog.Buffer
	srv := &tftpd.Server{Dir: root, OnTransfer: rec.hook,
		Logger: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	bound := make(chan error, 1)
	served := make(chan error, 1)
	go func() {
		// Serve runs on the namespace's thread: the Server opens each transfer's socket from
		// the goroutine that runs Serve, so they are in the namespace too.
		served <- seg.Bridge.Do(func() error {
			conn, err := net.ListenPacket("udp4", "192.0.2.1:69")
			bound <- err
			if err != nil {
				return err
			}
			return srv.Serve(conn)
		})
	}()
	if err := <-bound; err != nil {
		t.Fatalf("listen on 192.0.2.1:69 in the segment: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-served; !errors.Is(err, tftpd.ErrServerClosed) {
			t.Errorf("Serve = %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logBuf.String())
		}
	})

	testpeer.Start(t, testpeer.Cmd{
		Path: dnsmasq,
		Args: []string{"--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
			"--port=0", "--interface=br0", "--bind-interfaces", "--no-ping", "--log-dhcp", "--log-facility=-",
			"--pid-file=", "--user=root", "--group=root", "--dhcp-leasefile=" + filepath.Join(tmp, "leases"),
			"--dhcp-range=192.0.2.100,192.0.2.150,255.255.255.0,1h", "--dhcp-boot=ipxe.efi,,192.0.2.1"},
		Netns:    seg.Bridge,
		ReadyLog: "DHCP, IP range",
	})
	testpeer.Start(t, testpeer.Cmd{
		Path: qemu,
		Args: []string{"-accel", "tcg", "-M", "q35", "-m", "256", "-nodefaults", "-display", "none",
			"-serial", "file:" + filepath.Join(tmp, "serial.log"), "-no-reboot",
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code,
			"-drive", "if=pflash,format=raw,unit=1,file=" + filepath.Join(tmp, "vars.fd"),
			"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no",
			"-uuid", "8d3f6a52-1c7e-4b1a-9d0e-52540012345a",
			"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no",
			"-device", "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:5a,romfile=,bootindex=1"},
		Netns: seg.Bridge,
	})

	// The firmware needs 15-20 s under TCG on an idle machine; far more on a loaded one.
	deadline := time.Now().Add(4 * time.Minute)
	var reps []tftpd.Transfer
	for {
		reps = rec.all()
		if n := len(reps); n > 0 && reps[n-1].Outcome == tftpd.OutcomeOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no complete transfer of ipxe.efi within 4 minutes; reports: %+v", reps)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, r := range reps {
		t.Logf("transfer %d: %s %s from %v, %d of %d bytes, blksize %d, window %d, %v, err %v",
			i, r.File, r.Outcome, r.Peer, r.Bytes, r.Size, r.BlockSize, r.Window, r.Duration, r.Err)
	}
	if len(reps) < 2 || reps[0].Outcome != tftpd.OutcomeAborted || reps[0].Bytes != 0 {
		t.Errorf("want the firmware's first request aborted after the option acknowledgement, then a second")
	}
	last := reps[len(reps)-1]
	if last.File != "ipxe.efi" || last.Bytes != int64(len(efi)) || last.BlockSize != 1468 || last.Window != 4 {
		t.Errorf("last transfer: %s, %d bytes at blksize %d, window %d; want ipxe.efi, %d bytes at 1468, window 4", last.File, last.Bytes, last.BlockSize, last.Window, len(efi))
	}
	if !last.Peer.Addr().Is4() || !testpeer.SegmentPrefix.Contains(last.Peer.Addr()) {
		t.Errorf("peer %v is not on the segment", last.Peer)
	}
}
