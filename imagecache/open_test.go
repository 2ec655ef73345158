package imagecache_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/tftpd"
	"github.com/bettercompute/siteboot/tftpd/tftpdtest"
)

// refusal checks that err is a *GrantError for reason, reading as ErrNotGranted and as
// fs.ErrNotExist, or ErrFenced and fs.ErrPermission when fenced; and that its text holds
// no token (an fs.PathError around it names the file, as fs.FS asks).
func refusal(t *testing.T, err error, reason imagecache.Refusal, tokens ...string) {
	t.Helper()
	var ge *imagecache.GrantError
	if !errors.As(err, &ge) {
		t.Fatalf("error %v, want a *GrantError (%s)", err, reason)
	}
	if ge.Reason != reason {
		t.Errorf("reason %q, want %q (%v)", ge.Reason, reason, err)
	}
	fenced := reason == imagecache.RefusedFenced
	if !errors.Is(err, imagecache.ErrNotGranted) || errors.Is(err, imagecache.ErrFenced) != fenced ||
		errors.Is(err, fs.ErrPermission) != fenced || errors.Is(err, fs.ErrNotExist) == fenced {
		t.Errorf("%v: wraps the wrong sentinels for %s", err, reason)
	}
	for _, tok := range tokens {
		if tok != "" && strings.Contains(ge.Error(), tok) {
			t.Errorf("%v: the GrantError holds the token", ge)
		}
	}
}

func TestOpenGranted(t *testing.T) {
	f := newGrantFixture(t)
	ctx := context.Background()
	d1, d2 := f.img1.SHA256, f.img2.SHA256
	uncached := imagecache.Digest(sha256.Sum256([]byte("not cached")))
	boot, err := f.c.BootGrant(f.clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	iso, _ := f.c.SanbootGrant(d1, time.Time{})
	fw, _ := f.c.FirmwareGrant(d2)
	wrong := strings.Repeat("0", imagecache.TokenLen)
	// One live grant's token with its last digit changed: known to the table's shape, not to it.
	guessed := boot.Token[:imagecache.TokenLen-1] + "0"
	if guessed == boot.Token {
		guessed = guessed[:imagecache.TokenLen-1] + "1"
	}

	for _, tc := range []struct {
		name    string
		advance time.Duration
		fenced  bool
		token   string
		d       imagecache.Digest
		want    imagecache.Refusal // "" means opened
		body    []byte
	}{
		{name: "boot grant", token: boot.Token, d: d1, body: f.body1},
		{name: "boot grant, another image", token: boot.Token, d: d2},
		{name: "sanboot grant, its ISO", token: iso.Token, d: d1, body: f.body1},
		{name: "firmware grant", token: fw.Token, d: d2},
		{name: "firmware grant while fenced", fenced: true, token: fw.Token, d: d2},
		{name: "wrong grant", token: wrong, d: d1, want: imagecache.RefusedUnknownGrant},
		{name: "guessed grant", token: guessed, d: d1, want: imagecache.RefusedUnknownGrant},
		{name: "no grant (a plain digest)", token: "", d: d1, want: imagecache.RefusedMalformed},
		{name: "upper-case grant", token: strings.ToUpper(boot.Token), d: d1, want: imagecache.RefusedMalformed},
		{name: "short grant", token: boot.Token[:imagecache.TokenLen-2], d: d1, want: imagecache.RefusedMalformed},
		{name: "sanboot grant, other digest", token: iso.Token, d: d2, want: imagecache.RefusedOtherDigest},
		{name: "firmware grant, other digest", token: fw.Token, d: d1, want: imagecache.RefusedOtherDigest},
		{name: "not cached", token: boot.Token, d: uncached, want: imagecache.RefusedNotCached},
		{name: "fenced boot grant", fenced: true, token: boot.Token, d: d1, want: imagecache.RefusedFenced},
		{name: "fenced sanboot grant", fenced: true, token: iso.Token, d: d1, want: imagecache.RefusedFenced},
		{name: "boot grant before its not-after", advance: time.Hour - time.Second, token: boot.Token, d: d1, body: f.body1},
		{name: "boot grant at its not-after", advance: time.Second, token: boot.Token, d: d1, want: imagecache.RefusedExpired},
		{name: "expired grant, forgotten", token: boot.Token, d: d1, want: imagecache.RefusedUnknownGrant},
		{name: "firmware grant expired", advance: time.Hour, token: fw.Token, d: d2, want: imagecache.RefusedExpired},
	} {
		f.clk.Advance(tc.advance)
		f.fence.Store(!tc.fenced)
		file, err := f.c.OpenGranted(ctx, tc.token, tc.d)
		if tc.want != "" {
			if file != nil {
				t.Errorf("%s: a file and %v", tc.name, err)
				file.Close()
			}
			t.Run(tc.name, func(t *testing.T) { refusal(t, err, tc.want, boot.Token, iso.Token, fw.Token) })
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if file.Digest() != tc.d {
			t.Errorf("%s: digest %s, want %s", tc.name, file.Digest(), tc.d)
		}
		b, err := io.ReadAll(file)
		if err != nil || imagecache.Digest(sha256.Sum256(b)) != tc.d || int64(len(b)) != file.Size() {
			t.Errorf("%s: read %d bytes (size %d), %v; not the image", tc.name, len(b), file.Size(), err)
		}
		if tc.body != nil && !bytes.Equal(b, tc.body) {
			t.Errorf("%s: bytes differ from the image", tc.name)
		}
		if err := file.Close(); err != nil {
			t.Errorf("%s: Close: %v", tc.name, err)
		}
	}
	s := f.c.Stats()
	got := []uint64{s.RefusedPath, s.RefusedGrant, s.RefusedExpired, s.RefusedDigest, s.RefusedMissing, s.RefusedFenced, s.Served}
	want := []uint64{3, 3, 2, 2, 1, 2, 6}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refusals path/grant/expired/digest/missing/fenced, served (-want +got):\n%s", diff)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := f.c.OpenGranted(cancelled, iso.Token, d1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// An open File holds its image in the cache (in use, never trimmed) until it is closed,
// reads at offsets and seeks, and says what it is.
func TestOpenGrantedFile(t *testing.T) {
	f := newGrantFixture(t)
	d1 := f.img1.SHA256
	g, err := f.c.SanbootGrant(d1, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	file, err := f.c.OpenGranted(context.Background(), g.Token, d1)
	if err != nil {
		t.Fatal(err)
	}
	if it, _ := f.c.Lookup(d1); it.InUse != 1 {
		t.Errorf("in use %d while open, want 1", it.InUse)
	}
	st, err := file.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() != int64(len(f.body1)) || file.Size() != st.Size() {
		t.Errorf("Stat: %v, %v; Size %d; want a regular file of %d bytes", st, err, file.Size(), len(f.body1))
	}
	mid := make([]byte, 100)
	if n, err := file.ReadAt(mid, 5000); n != 100 || err != nil || !bytes.Equal(mid, f.body1[5000:5100]) {
		t.Errorf("ReadAt: %d, %v", n, err)
	}
	if _, err := file.Seek(-10, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	if tail, err := io.ReadAll(file); err != nil || !bytes.Equal(tail, f.body1[len(f.body1)-10:]) {
		t.Errorf("read after Seek: %x, %v", tail, err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if it, _ := f.c.Lookup(d1); it.InUse != 0 {
		t.Errorf("in use %d after Close, want 0", it.InUse)
	}
}

// transfers passes on tftpd's reports, which come when a transfer has ended on the
// server's side (after the client saw its end).
type transfers chan tftpd.Transfer

func (r transfers) record(t tftpd.Transfer) { r <- t }

// next waits for the next report.
func (r transfers) next(t *testing.T) tftpd.Transfer {
	t.Helper()
	select {
	case tr := <-r:
		return tr
	case <-time.After(10 * time.Second):
		t.Fatal("tftpd reported no transfer")
	}
	return tftpd.Transfer{}
}

// TestGrantFSOverTFTP serves the cache's GrantFS with tftpd on loopback and fetches from
// it with pin/tftp's client, as firmware does: a granted image arrives whole with its size;
// every refusal reaches the client as an error, and tftpd's report holds the reason.
func TestGrantFSOverTFTP(t *testing.T) {
	f := newGrantFixture(t)
	d1, d2 := f.img1.SHA256, f.img2.SHA256
	boot, err := f.c.BootGrant(f.clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	fw, _ := f.c.FirmwareGrant(d2)
	rec := make(transfers, 16)
	srv, err := tftpdtest.NewServer(nil, &tftpd.Server{FS: f.c.GrantFS(), OnTransfer: rec.record})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Close()
		if err := srv.Err(); err != nil {
			t.Error(err)
		}
	}()
	name := func(g imagecache.Grant, d imagecache.Digest) string { return strings.TrimPrefix(g.Path(d), "/cache/") }

	for _, blksize := range []int{0, 1468} {
		got, size, err := tftpdtest.Fetch(srv.Addr, name(boot, d1), blksize)
		if err != nil {
			t.Fatalf("blksize %d: %v", blksize, err)
		}
		if !bytes.Equal(got, f.body1) || size != int64(len(f.body1)) {
			t.Errorf("blksize %d: %d bytes, tsize %d; want the image's %d", blksize, len(got), size, len(f.body1))
		}
		if tr := rec.next(t); tr.Outcome != tftpd.OutcomeOK || tr.Bytes != int64(len(f.body1)) {
			t.Errorf("blksize %d: reported %s, %d bytes", blksize, tr.Outcome, tr.Bytes)
		}
	}
	if it, _ := f.c.Lookup(d1); it.InUse != 0 {
		t.Errorf("in use %d after the transfers, want 0", it.InUse)
	}

	for _, tc := range []struct {
		name    string
		advance time.Duration
		fenced  bool
		file    string
		reason  imagecache.Refusal
		outcome tftpd.Outcome
	}{
		{name: "wrong grant", file: "t/" + strings.Repeat("0", imagecache.TokenLen) + "/" + d1.String(), reason: imagecache.RefusedUnknownGrant, outcome: tftpd.OutcomeNotFound},
		{name: "plain digest", file: d1.String(), reason: imagecache.RefusedMalformed, outcome: tftpd.OutcomeNotFound},
		{name: "plain t/digest", file: "t/" + d1.String(), reason: imagecache.RefusedMalformed, outcome: tftpd.OutcomeNotFound},
		{name: "firmware grant, other digest", file: name(fw, d1), reason: imagecache.RefusedOtherDigest, outcome: tftpd.OutcomeNotFound},
		{name: "fenced", fenced: true, file: name(boot, d1), reason: imagecache.RefusedFenced, outcome: tftpd.OutcomeDenied},
		{name: "expired", advance: time.Hour, file: name(boot, d1), reason: imagecache.RefusedExpired, outcome: tftpd.OutcomeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.clk.Advance(tc.advance)
			f.fence.Store(!tc.fenced)
			got, _, err := tftpdtest.Fetch(srv.Addr, tc.file, 0)
			if err == nil {
				t.Fatalf("fetched %d bytes", len(got))
			}
			tr := rec.next(t)
			if tr.Requested != tc.file || tr.Outcome != tc.outcome {
				t.Errorf("reported %q: %s, want %s", tr.Requested, tr.Outcome, tc.outcome)
			}
			refusal(t, tr.Err, tc.reason, boot.Token, fw.Token)
		})
	}
	// The firmware grant still serves over TFTP, fenced or not.
	f.fence.Store(false)
	if got, _, err := tftpdtest.Fetch(srv.Addr, name(fw, d2), 512); err != nil || imagecache.Digest(sha256.Sum256(got)) != d2 {
		t.Errorf("firmware grant: %d bytes, %v", len(got), err)
	}
	if tr := rec.next(t); tr.Outcome != tftpd.OutcomeOK {
		t.Errorf("firmware grant: reported %s", tr.Outcome)
	}
}

// GrantFS opens only t/TOKEN/SHA256, answering as fs.FS asks (a *fs.PathError).
func TestGrantFSNames(t *testing.T) {
	f := newGrantFixture(t)
	d1 := f.img1.SHA256
	g, _ := f.c.BootGrant(time.Time{})
	fsys := f.c.GrantFS()
	file, err := fsys.Open("t/" + g.Token + "/" + d1.String())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(file); err != nil || !bytes.Equal(b, f.body1) {
		t.Errorf("read %d bytes, %v", len(b), err)
	}
	file.Close()
	for _, name := range []string{
		"", ".", "t", "t/" + g.Token, "t/" + g.Token + "/" + d1.String() + "/", "/t/" + g.Token + "/" + d1.String(),
		"cache/t/" + g.Token + "/" + d1.String(), "t/" + g.Token + "/" + strings.ToUpper(d1.String()),
		"t/../t/" + g.Token + "/" + d1.String(), "t/" + g.Token + "/" + d1.String()[:63],
	} {
		_, err := fsys.Open(name)
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != name || pe.Op != "open" {
			t.Errorf("Open(%q): %v, want a *fs.PathError", name, err)
			continue
		}
		refusal(t, err, imagecache.RefusedMalformed, g.Token)
	}
}

// Whatever name a TFTP client asks, GrantFS opens only the one granted name, and refuses
// everything else with an *fs.PathError around a *GrantError that reads as fs.ErrNotExist.
func FuzzGrantFS(f *testing.F) {
	c, body, d, g := fuzzCache(f)
	valid := "t/" + g.Token + "/" + d.String()
	for _, s := range []string{valid, "/" + valid, valid + "/", "cache/" + valid, d.String(), "t/" + d.String(),
		strings.ToUpper(valid), "t/" + g.Token + "/" + strings.Repeat("0", 64), "t/" + strings.Repeat("0", 32) + "/" + d.String(), ""} {
		f.Add(s)
	}
	fsys := c.GrantFS()
	f.Fuzz(func(t *testing.T, name string) {
		file, err := fsys.Open(name)
		if name == valid {
			if err != nil {
				t.Fatalf("the granted name: %v", err)
			}
			b, err := io.ReadAll(file)
			file.Close()
			if err != nil || !bytes.Equal(b, body) {
				t.Fatalf("the granted name read %q, %v", b, err)
			}
			return
		}
		if err == nil {
			file.Close()
			t.Fatalf("Open(%q) opened a file", name)
		}
		var pe *fs.PathError
		var ge *imagecache.GrantError
		if !errors.As(err, &pe) || pe.Path != name || !errors.As(err, &ge) || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Open(%q): %v", name, err)
		}
		if strings.Contains(ge.Error(), g.Token) {
			t.Fatalf("Open(%q): the GrantError holds the token: %v", name, ge)
		}
	})
}
