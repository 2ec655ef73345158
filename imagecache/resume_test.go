package imagecache_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/google/go-cmp/cmp"
)

// resumeSize is the image of the kill test: 256 MiB, 64 MiB with -short, or
// IMAGECACHE_RESUME_MIB.
func resumeSize(t *testing.T) int {
	size := 256 << 20
	if testing.Short() {
		size = 64 << 20
	}
	if v := os.Getenv("IMAGECACHE_RESUME_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("IMAGECACHE_RESUME_MIB=%q", v)
		}
		size = n << 20
	}
	return size
}

// One pull of a large image, from a net/http origin with an ETag, is killed with SIGKILL 30
// times at random points: 24 at random bytes of the transfer, 5 at a random moment after
// the process started (its start-up, the re-hash of the partial copy, or the transfer) and
// one in the commit after the last byte. The origin's socket send buffer is small, so that
// the bytes it wrote are the bytes that reached the client (see newOrigin). Each restarted process resumes the partial copy
// (Range with If-Range on the ETag). In all, the origin sends at most 1.3 times the image's
// bytes, and no wrong file is ever visible.
func TestResumeAcrossSIGKILL(t *testing.T) {
	size := resumeSize(t)
	body := randomBytes(77, size)
	digest := imagecache.Digest(sha256.Sum256(body))
	o := newOrigin(t, body)
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 2))
	t.Logf("seed %d, image %d MiB", seed, size>>20)

	// Kinds of kill, in a random order: 24 at a random byte of what is left to pull (spread so
	// that each lands within the transfer), 5 at a random moment after start, then one in the
	// commit after the last byte.
	kinds := slices.Repeat([]string{"byte"}, 24)
	kinds = append(kinds, slices.Repeat([]string{"time"}, 5)...)
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	kinds = append(kinds, "commit")
	type kill struct {
		at    int64         // kill once the partial copy holds this many bytes
		after time.Duration // "time" kills: or after this long, whichever comes first
	}
	next := func(i int) kill {
		cur := max(tempSize(dir), 0)
		left := int64(size) - cur
		byteKills := 1
		for _, k := range kinds[i:] {
			if k != "commit" {
				byteKills++
			}
		}
		at := cur + 1 + rng.Int64N(max(1, 2*left/int64(byteKills)))
		switch kinds[i] {
		case "time":
			// A random moment, but before the transfer would end: it also kills at a
			// random byte like the others, when it comes to that first.
			return kill{at: at, after: time.Duration(rng.Int64N(int64(150 * time.Millisecond)))}
		case "commit":
			return kill{at: int64(size), after: time.Duration(rng.Int64N(int64(60 * time.Millisecond)))}
		}
		return kill{at: at}
	}
	plan := kinds

	child := func() (*exec.Cmd, *bytes.Buffer, chan struct{}) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashURLEnv+"="+o.URL(), crashSHAEnv+"="+digest.String())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		return cmd, &stderr, exited
	}
	killed, early := 0, 0
	for i := range plan {
		if len(visibleFiles(t, dir)) > 0 {
			break // the pull committed before this kill
		}
		k := next(i)
		cmd, stderr, exited := child()
		started := time.Now()
		deadline := started.Add(2 * time.Minute)
	wait:
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				break wait
			default:
			}
			if tempSize(dir) >= k.at || (kinds[i] == "time" && time.Since(started) >= k.after) {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		if kinds[i] == "commit" {
			time.Sleep(k.after)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			killed++
		} else if cmd.ProcessState.ExitCode() == 0 {
			early++
		} else {
			t.Fatalf("kill %d: child exited %d: %s", i, cmd.ProcessState.ExitCode(), stderr)
		}
		checkVisibleVerified(t, dir)
		if vis := visibleFiles(t, dir); len(vis) > 1 || (len(vis) == 1 && vis[0] != digest.String()) {
			t.Fatalf("kill %d: visible files %v", i, vis)
		}
	}
	if len(visibleFiles(t, dir)) == 0 {
		cmd, stderr, exited := child()
		<-exited
		if cmd.ProcessState.ExitCode() != 0 {
			t.Fatalf("last child exited %d: %s", cmd.ProcessState.ExitCode(), stderr)
		}
	}
	checkVisibleVerified(t, dir)
	if diff := cmp.Diff([]string{digest.String()}, visibleFiles(t, dir)); diff != "" {
		t.Fatalf("visible files (-want +got):\n%s", diff)
	}
	reqs := o.Requests()
	var resumed, full int
	for _, r := range reqs {
		switch r.Status {
		case 206:
			resumed++
		case 200:
			full++
		}
	}
	ratio := float64(o.sent.Load()) / float64(size)
	t.Logf("%d kills (%d processes finished first), %d requests (%d resumed with 206, %d full 200); %d bytes downloaded for a %d byte image: %.3fx",
		killed, early, len(reqs), resumed, full, o.sent.Load(), size, ratio)
	if killed < 25 {
		t.Errorf("only %d of %d kills landed before the pull committed", killed, len(plan))
	}
	if ratio > 1.3 {
		t.Errorf("%.3fx the image's bytes downloaded, want at most 1.3x", ratio)
	}
	if resumed == 0 {
		t.Errorf("no request resumed a partial copy")
	}
}

// A pull stopped half-way (the process shut down) is resumed by the next Open: with Range
// and If-Range on the origin's validator it downloads only the rest; when the validator
// changed or the origin ignores Range, it starts over from the origin's full answer.
func TestResumeAfterRestart(t *testing.T) {
	body := randomBytes(78, 2<<20)
	half := int64(len(body) / 2)
	digest := imagecache.Digest(sha256.Sum256(body))
	tests := []struct {
		name       string
		etag       string
		change     func(o *origin)
		wantIfR    string
		wantStatus int
	}{
		{name: "same etag", etag: `"v1"`, wantIfR: `"v1"`, wantStatus: 206},
		{name: "etag changed", etag: `"v1"`, change: func(o *origin) { o.etag = `"v2"` }, wantIfR: `"v1"`, wantStatus: 200},
		{name: "range ignored", etag: `"v1"`, change: func(o *origin) { o.ignoreRange = true }, wantIfR: `"v1"`, wantStatus: 200},
		{name: "same last-modified", wantIfR: "Sun, 01 Nov 2026 00:00:00 GMT", wantStatus: 206},
		{name: "last-modified changed", change: func(o *origin) { o.modTime = o.modTime.Add(time.Hour) },
			wantIfR: "Sun, 01 Nov 2026 00:00:00 GMT", wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := newOrigin(t, body)
			o.set(func(o *origin) { o.etag, o.holdAt, o.holdOnce = tt.etag, half, true })
			cfg := fastConfig(t)
			img := imagecache.Image{URL: o.URL(), SHA256: digest}
			c1, err := imagecache.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			c1.SetPinned([]imagecache.Image{img})
			waitFor(t, "half the image received", func() bool {
				st := c1.Status()
				return len(st) == 1 && st[0].Bytes == half
			})
			c1.Close()
			if tt.change != nil {
				o.set(tt.change)
			}
			c2 := open(t, cfg)
			if err := c2.Pull(context.Background(), img); err != nil {
				t.Fatalf("Pull after restart: %v", err)
			}
			checkVisibleVerified(t, cfg.Dir)
			reqs := o.Requests()
			if len(reqs) != 2 {
				t.Fatalf("requests %+v, want 2", reqs)
			}
			want := originReq{Range: "bytes=" + strconv.FormatInt(half, 10) + "-", IfRange: tt.wantIfR, Status: tt.wantStatus}
			if diff := cmp.Diff(want, reqs[1]); diff != "" {
				t.Errorf("resume request (-want +got):\n%s", diff)
			}
			wantSent := int64(len(body))
			if tt.wantStatus == 200 {
				wantSent += half
			}
			if got := o.sent.Load(); got != wantSent {
				t.Errorf("origin sent %d bytes, want %d", got, wantSent)
			}
			if s := c2.Stats(); s.ResumedPulls != 1 || s.ResumedBytes != uint64(half) {
				t.Errorf("ResumedPulls %d ResumedBytes %d, want 1 and %d", s.ResumedPulls, s.ResumedBytes, half)
			}
		})
	}
}

// A partial copy whose bytes were damaged on disk is detected by the digest and the pull
// starts over once, from byte 0: the damage never becomes a visible file.
func TestResumeDamagedPrefix(t *testing.T) {
	body := randomBytes(79, 1<<20)
	half := int64(len(body) / 2)
	digest := imagecache.Digest(sha256.Sum256(body))
	o := newOrigin(t, body)
	o.set(func(o *origin) { o.holdAt, o.holdOnce = half, true })
	cfg := fastConfig(t)
	img := imagecache.Image{URL: o.URL(), SHA256: digest}
	c1, err := imagecache.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c1.SetPinned([]imagecache.Image{img})
	waitFor(t, "half the image received", func() bool {
		st := c1.Status()
		return len(st) == 1 && st[0].Bytes == half
	})
	c1.Close()
	f, err := os.OpenFile(cfg.Dir+"/.pull-"+digest.String(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{body[1000] ^ 0xff}, 1000)
	f.Close()
	c2 := open(t, cfg)
	if err := c2.Pull(context.Background(), img); err != nil {
		t.Fatalf("Pull: %v", err)
	}
	checkVisibleVerified(t, cfg.Dir)
	got := o.Requests()
	if len(got) != 3 || got[1].Status != 206 || got[2].Range != "" || got[2].Status != 200 {
		t.Errorf("requests %+v, want the first, a resume (206), and one from the start (200)", got)
	}
}

// waitFor polls cond every 2 ms for up to 30 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for range 15000 {
		if cond() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
