package tftpd_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/tftpd"
	"github.com/google/go-cmp/cmp"
	"github.com/pin/tftp/v3"
)

// TestRealClients fetches whole files with curl, atftp (also at windowsize 4 and 16, RFC
// 7440), tftp-hpa's tftp and pin/tftp's client at each block size, and checks them byte for
// byte and against the hook's report: once as transfers that run alone (each waits on a
// thread of its own, on Linux) and once with every transfer in the network poller (as when
// many run at once).
func TestRealClients(t *testing.T) {
	onBothPaths(t, testRealClients)
}

func testRealClients(t *testing.T, poller bool) {
	dir := t.TempDir()
	files := map[string][]byte{
		"odd.bin":      payload(1_000_003, 1),
		"empty.bin":    {},
		"sub/dir.bin":  payload(70_001, 2),
		"one-byte.bin": {0x42},
	}
	blksizes := []int{512, 1468, 8192, 65464}
	for _, b := range blksizes {
		files[fmt.Sprintf("exact-%d.bin", b)] = payload(b*37, uint64(b)) // ends with an empty block
	}
	writeFiles(t, dir, files)
	rec := newRecorder()
	srv := &tftpd.Server{Dir: dir, OnTransfer: rec.hook}
	if poller {
		tftpd.PollerOnly(srv)
	}
	addr := serve(t, srv, "127.0.0.1")
	port := strconv.Itoa(addr.Port)

	type client struct {
		name    string
		blksize []int // block sizes it can ask for
		fetch   func(t *testing.T, remote, local string, blksize int)
		window  int // windowsize asked; 0: none
	}
	run := func(t *testing.T, prog string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, prog, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %q: %v\n%s", prog, args, err, out)
		}
	}
	clients := []client{
		{"curl", blksizes, func(t *testing.T, remote, local string, blksize int) {
			curl := testpeer.LookPath(t, "curl", "curl")
			run(t, curl, "-sS", "-o", local, "--tftp-blksize", strconv.Itoa(blksize),
				"tftp://127.0.0.1:"+port+"/"+remote)
		}, 0},
		{"atftp", blksizes, func(t *testing.T, remote, local string, blksize int) {
			atftp := testpeer.LookPath(t, "atftp", "atftp")
			run(t, atftp, "--get", "-r", remote, "-l", local, "--option", "blksize "+strconv.Itoa(blksize),
				"--option", "tsize", "127.0.0.1", port)
		}, 0},
		{"atftp-w4", blksizes, func(t *testing.T, remote, local string, blksize int) {
			atftp := testpeer.LookPath(t, "atftp", "atftp")
			run(t, atftp, "--get", "-r", remote, "-l", local, "--option", "blksize "+strconv.Itoa(blksize),
				"--option", "tsize", "--option", "windowsize 4", "127.0.0.1", port)
		}, 4},
		{"atftp-w16", blksizes, func(t *testing.T, remote, local string, blksize int) {
			atftp := testpeer.LookPath(t, "atftp", "atftp")
			run(t, atftp, "--get", "-r", remote, "-l", local, "--option", "blksize "+strconv.Itoa(blksize),
				"--option", "windowsize 16", "127.0.0.1", port)
		}, 16},
		{"tftp-hpa", []int{512}, func(t *testing.T, remote, local string, blksize int) {
			tftpc := testpeer.LookPath(t, "tftp", "tftp-hpa")
			run(t, tftpc, "-m", "binary", "127.0.0.1", port, "-c", "get", remote, local)
		}, 0},
		{"pin", blksizes, func(t *testing.T, remote, local string, blksize int) {
			c, err := tftp.NewClient(addr.String())
			if err != nil {
				t.Fatal(err)
			}
			c.SetBlockSize(blksize)
			c.RequestTSize(true)
			wt, err := c.Receive(remote, "octet")
			if err != nil {
				t.Fatal(err)
			}
			want := int64(len(files[remote]))
			if size, ok := wt.(tftp.IncomingTransfer).Size(); want > 0 && (!ok || size != want) {
				t.Errorf("tsize: got %d (%v), want %d", size, ok, want)
			}
			var buf bytes.Buffer
			if _, err := wt.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(local, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}, 0},
	}
	n := 0
	for _, c := range clients {
		for _, b := range c.blksize {
			for _, remote := range []string{"odd.bin", fmt.Sprintf("exact-%d.bin", b), "sub/dir.bin", "one-byte.bin", "empty.bin"} {
				if _, ok := files[remote]; !ok {
					remote = "exact-512.bin"
				}
				t.Run(fmt.Sprintf("%s/%d/%s", c.name, b, remote), func(t *testing.T) {
					local := filepath.Join(t.TempDir(), "out")
					before := len(rec.all())
					c.fetch(t, remote, local, b)
					got, err := os.ReadFile(local)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, files[remote]) {
						t.Fatalf("%s: got %d bytes, want %d identical bytes", remote, len(got), len(files[remote]))
					}
					reps := rec.waitN(t, before+1)
					r := reps[len(reps)-1]
					wantBlk := b
					if c.name == "tftp-hpa" {
						wantBlk = 512
					}
					got2 := struct {
						File      string
						Outcome   tftpd.Outcome
						Bytes     int64
						Size      int64
						BlockSize int
						Window    int
						Err       error
					}{r.File, r.Outcome, r.Bytes, r.Size, r.BlockSize, r.Window, r.Err}
					wantWin := 1
					if c.window > 0 {
						wantWin = min(c.window, tftpd.MaxWindowBytes/wantBlk)
					}
					want := got2
					want.File, want.Outcome, want.Bytes, want.Size, want.BlockSize, want.Window, want.Err = remote, tftpd.OutcomeOK, int64(len(files[remote])), int64(len(files[remote])), wantBlk, wantWin, nil
					if diff := cmp.Diff(want, got2, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
						t.Errorf("transfer report (-want +got):\n%s", diff)
					}
					if !r.Peer.Addr().IsLoopback() || r.Duration < 0 {
						t.Errorf("report peer %v duration %v", r.Peer, r.Duration)
					}
					n++
				})
			}
		}
	}
	c := srv.Stats()
	if c.Completed != uint64(n) || c.Failed != 0 || c.Active != 0 {
		t.Errorf("counters %+v: want %d completed, none failed or active", c, n)
	}
}

// TestTsizeAtftpTrace checks the option acknowledgement a real client receives: tsize with
// the file's size, the blksize and the windowsize asked for.
func TestTsizeAtftpTrace(t *testing.T) {
	atftp := testpeer.LookPath(t, "atftp", "atftp")
	dir := t.TempDir()
	data := payload(123_457, 9)
	writeFiles(t, dir, map[string][]byte{"f.bin": data})
	addr := serve(t, &tftpd.Server{Dir: dir}, "127.0.0.1")
	local := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, atftp, "--trace", "--get", "-r", "f.bin", "-l", local,
		"--option", "tsize", "--option", "blksize 1468", "--option", "windowsize 4",
		"127.0.0.1", strconv.Itoa(addr.Port)).CombinedOutput()
	if err != nil {
		t.Fatalf("atftp: %v\n%s", err, out)
	}
	// atftp --trace prints the OACK it received, e.g. "received OACK <tsize: 123457, blksize: 1468, >".
	var oack string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "received OACK") {
			oack = line
		}
	}
	for _, want := range []string{"tsize: 123457,", "blksize: 1468,", "windowsize: 4,"} {
		if !strings.Contains(oack, want) {
			t.Errorf("OACK %q lacks %q; trace:\n%s", oack, want, out)
		}
	}
	got, _ := os.ReadFile(local)
	if !bytes.Equal(got, data) {
		t.Errorf("got %d bytes, want %d identical", len(got), len(data))
	}
}

// TestBlockNumberWraps: a file of more than 65535 blocks; the block number wraps to 0 (as
// tftpd-hpa, curl and atftp do) and the file arrives whole.
func TestBlockNumberWraps(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 32 MiB in 512-byte blocks")
	}
	curl := testpeer.LookPath(t, "curl", "curl")
	dir := t.TempDir()
	data := payload(65536*512+1000, 14)
	writeFiles(t, dir, map[string][]byte{"big.bin": data})
	addr := serve(t, &tftpd.Server{Dir: dir}, "127.0.0.1")
	local := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, curl, "-sS", "-o", local, "--tftp-blksize", "512",
		"tftp://"+addr.String()+"/big.bin").CombinedOutput(); err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(local)
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want %d identical", len(got), len(data))
	}
}
