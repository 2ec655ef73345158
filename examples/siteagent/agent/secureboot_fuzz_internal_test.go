package agent

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/netip"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/clock/clocktest"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/tftpd"
)

// FuzzSecureBootNames puts arbitrary TFTP names, as a client sends them, through the signed
// chain's file system (mounted in the agent's TFTP file system) and tftpd's reports of them: no name panics, an open either gives a
// file or fails with fs.ErrNotExist or fs.ErrInvalid, and no report activates a key or binds
// a nonce that was never handed out.
func FuzzSecureBootNames(f *testing.F) {
	for _, s := range []string{
		"grub/grub.cfg", "sb/shimx64.efi", "sb/grubx64.efi", "sb/0123456789abcdef0123456789abcdef/shimx64.efi",
		"sb/key?mac=52:54:00:12:34:56", "sb/key?mac=52:54:00:12:34:56&mac=x", "sb/key?%zz",
		"boot/grub.cfg?mac=52:54:00:12:34:56&uuid=4c4c4544-0031-3510-8052-b4c04f4e4b33&n=0123456789abcdef0123456789abcdef",
		"boot/grub.cfg?", "boot/grub.cfg?mac=", "cache/t/x/" + string(make([]byte, 64)), "cache/t/../../etc/passwd",
		"ipxe.efi", "sb/", "sb//x", "\\sb\\key?mac=1", "/sb/key?mac=52-54-00-12-34-56",
	} {
		f.Add(s, uint8(0))
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktest.New(now)
	cache, err := imagecache.Open(context.Background(), imagecache.Config{Dir: f.TempDir(), Clock: clocktest.New(now)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { cache.Close() })
	a := &Agent{nonces: bootbind.NewNonces(bootbind.Config{Clock: clk}), cache: cache, log: slog.New(slog.DiscardHandler)}
	s := &secureBoot{
		a: a, shimName: "shimx64.efi", loaderName: "grubx64.efi", built: &sbFiles{shim: []byte("MZshim"), grub: []byte("MZgrub")},
		chain: []byte("# chain\n"), keys: bootbind.NewKeys(bootbind.Config{Clock: clk}), renders: map[string]*render{},
	}
	// The TFTP file system the agent serves: the builds, and the signed chain's directories.
	tfs := bootserver.FS{Builds: fstest.MapFS{"ipxe.efi": {Data: []byte("MZipxe")}}, Mounts: s.mounts()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	f.Cleanup(func() { s.cancel(); s.wg.Wait() })
	a.sb = s
	outcomes := []tftpd.Outcome{tftpd.OutcomeOK, tftpd.OutcomeNotFound, tftpd.OutcomeAborted, tftpd.OutcomeTimeout}
	f.Fuzz(func(t *testing.T, name string, o uint8) {
		if file, err := tfs.OpenFrom(name, netip.MustParseAddrPort("127.0.0.1:1024")); err == nil {
			if st, err := file.Stat(); err != nil {
				t.Errorf("%q: stat: %v", name, err)
			} else if _, err := io.Copy(io.Discard, file); err != nil && !st.IsDir() {
				t.Errorf("%q: read: %v", name, err)
			}
			file.Close()
		} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("%q: %v", name, err)
		}
		s.tftpTransfer(tftpd.Transfer{Requested: name, File: name, Peer: netip.MustParseAddrPort("192.0.2.100:1024"), Outcome: outcomes[o%4]})
		if n := s.keys.Stats().Activated; n != 0 {
			t.Fatalf("%q: a report activated %d keys", name, n)
		}
		if a.nonces.FetchedAny(hwid.MAC{0x52, 0x54, 0, 0x12, 0x34, 0x56}, bootbind.KindShim) {
			t.Fatalf("%q: a nonce never handed out is bound", name)
		}
	})
}
