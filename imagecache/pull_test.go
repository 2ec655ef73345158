package imagecache_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/google/go-cmp/cmp"
)

// Every kind of bad source ends in a typed failure and never in a visible file; sources
// that fail once are retried, resuming by Range when the source allows it.
func TestPullSources(t *testing.T) {
	body := randomBytes(1, 3<<20+17)
	digest := imagecache.Digest(sha256.Sum256(body))
	tests := []struct {
		mode    string
		noRange bool
		retries int
		wantErr error // nil: the pull succeeds
		reason  string
		wantReq []string
		// keepsPartial: the failed pull keeps its partial copy and resume record.
		keepsPartial bool
	}{
		{mode: "good", wantReq: []string{"GET "}},
		{mode: "wrong", wantErr: imagecache.ErrDigestMismatch, reason: "digest-mismatch", wantReq: []string{"GET "}},
		{mode: "truncate", retries: -1, wantErr: imagecache.ErrShortBody, reason: "short-body", wantReq: []string{"GET "}, keepsPartial: true},
		{mode: "truncate", retries: 2, wantErr: imagecache.ErrShortBody, reason: "short-body",
			wantReq: []string{"GET ", "GET bytes=1572872-", "GET bytes=2359308-"}, keepsPartial: true},
		{mode: "stall", retries: -1, wantErr: imagecache.ErrStalled, reason: "stalled", wantReq: []string{"GET "}, keepsPartial: true},
		{mode: "404", wantErr: &imagecache.StatusError{}, reason: "http-404", wantReq: []string{"GET "}},
		{mode: "500once", wantReq: []string{"GET ", "GET "}},
		{mode: "truncateonce", wantReq: []string{"GET ", "GET bytes=1572872-"}},
		{mode: "truncateonce", noRange: true, wantReq: []string{"GET ", "GET bytes=1572872-"}},
		{mode: "stallonce", wantReq: []string{"GET ", "GET bytes=1572872-"}},
		{mode: "stallonce", noRange: true, wantReq: []string{"GET ", "GET bytes=1572872-"}},
		{mode: "changing", wantReq: []string{"GET ", "GET bytes=1572872-", "GET "}},
		{mode: "badrange", wantReq: []string{"GET ", "GET bytes=1572872-", "GET "}},
	}
	for _, tt := range tests {
		name := tt.mode
		if tt.noRange {
			name += "/range-ignored"
		}
		if tt.retries != 0 {
			name += "/retries=" + string(rune('0'+max(tt.retries, 0)))
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := newSource(t, body, tt.mode, tt.noRange)
			cfg := fastConfig(t)
			cfg.Retries = tt.retries
			if strings.HasPrefix(tt.mode, "stall") {
				cfg.StallTimeout = time.Second
			}
			c := open(t, cfg)
			img := imagecache.Image{URL: src.URL(), SHA256: digest, Format: "raw"}
			// Pull before pinning: pinning first starts a transfer of its own, and a
			// failure quick enough to end before Pull is called would make Pull's a
			// second one. Pinned after a failure, the image waits for its retry time.
			err := c.Pull(context.Background(), img)
			if perr := c.SetPinned([]imagecache.Image{img}); perr != nil {
				t.Fatal(perr)
			}
			if diff := cmp.Diff(tt.wantReq, src.Requests()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			st := c.Status()
			if len(st) != 1 {
				t.Fatalf("Status: %d images, want 1", len(st))
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Pull: %v", err)
				}
				if st[0].State != imagecache.StateReady || st[0].Bytes != int64(len(body)) {
					t.Errorf("Status = %v %d bytes, want ready %d", st[0].State, st[0].Bytes, len(body))
				}
				got, rerr := os.ReadFile(filepath.Join(cfg.Dir, digest.String()))
				if rerr != nil || sha256.Sum256(got) != digest {
					t.Errorf("cached file: err %v, digest ok %v", rerr, sha256.Sum256(got) == digest)
				}
				if diff := cmp.Diff([]string{digest.String()}, allFiles(t, cfg.Dir)); diff != "" {
					t.Errorf("files (-want +got):\n%s", diff)
				}
				return
			}
			var pe *imagecache.PullError
			if !errors.As(err, &pe) {
				t.Fatalf("Pull error %v (%T), want a *PullError", err, err)
			}
			var se *imagecache.StatusError
			if errors.As(tt.wantErr, &se) {
				if !errors.As(err, &se) || se.Code != 404 {
					t.Errorf("Pull error %v, want a 404 StatusError", err)
				}
			} else if !errors.Is(err, tt.wantErr) {
				t.Errorf("Pull error %v, want %v", err, tt.wantErr)
			}
			if got := imagecache.ReasonOf(st[0].Err); got != tt.reason {
				t.Errorf("Reason = %q, want %q", got, tt.reason)
			}
			if st[0].State != imagecache.StateFailed || !errors.Is(st[0].Err, pe.Err) {
				t.Errorf("Status = %v (%v), want failed with the pull's error", st[0].State, st[0].Err)
			}
			// A source that failed on the way keeps its partial copy for a later resume;
			// bytes that cannot be right are removed. Neither is ever visible.
			var wantFiles []string
			if tt.keepsPartial {
				wantFiles = []string{".pull-" + digest.String(), ".pull-" + digest.String() + ".meta"}
			}
			if diff := cmp.Diff(wantFiles, allFiles(t, cfg.Dir)); diff != "" {
				t.Errorf("files left after a failed pull (-want +got):\n%s", diff)
			}
			if inv := c.Inventory(); len(inv) != 0 {
				t.Errorf("Inventory after a failed pull: %v", inv)
			}
		})
	}
}

// Concurrent asks for one digest share one transfer.
func TestPullSingleflight(t *testing.T) {
	body := randomBytes(2, 1<<20)
	src := newSource(t, body, "good", false)
	c := open(t, fastConfig(t))
	img := imagecache.Image{URL: src.URL(), SHA256: sha256.Sum256(body)}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() { errs <- c.Pull(context.Background(), img) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(src.Requests()); n != 1 {
		t.Errorf("source got %d requests for 16 concurrent pulls, want 1", n)
	}
	if s := c.Stats(); s.PullsOK != 1 || s.BytesPulled != uint64(len(body)) {
		t.Errorf("Stats PullsOK %d BytesPulled %d, want 1 %d", s.PullsOK, s.BytesPulled, len(body))
	}
}

// A failed image is not pulled again by SetPinned until RetryFailedAfter has passed.
func TestSetPinnedRetriesFailedLater(t *testing.T) {
	body := randomBytes(3, 1000)
	src := newSource(t, body, "404", false)
	clk := newClock()
	cfg := fastConfig(t)
	cfg.Clock = clk
	cfg.RetryFailedAfter = time.Minute
	c := open(t, cfg)
	img := imagecache.Image{URL: src.URL(), SHA256: sha256.Sum256(body)}
	wait := func() imagecache.Status {
		t.Helper()
		for range 500 {
			st := c.Status()
			if len(st) == 1 && st[0].State != imagecache.StateWarming {
				return st[0]
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatal("pull did not end")
		return imagecache.Status{}
	}
	c.SetPinned([]imagecache.Image{img})
	if st := wait(); st.State != imagecache.StateFailed {
		t.Fatalf("state %v, want failed", st.State)
	}
	c.SetPinned([]imagecache.Image{img})
	wait()
	if n := len(src.Requests()); n != 1 {
		t.Errorf("requests after a second SetPinned within the interval: %d, want 1", n)
	}
	clk.Advance(time.Minute)
	c.SetPinned([]imagecache.Image{img})
	wait()
	if n := len(src.Requests()); n != 2 {
		t.Errorf("requests after RetryFailedAfter: %d, want 2", n)
	}
}

// Images over the budget are refused before they fill the disk.
func TestPullTooLarge(t *testing.T) {
	body := randomBytes(4, 5000)
	src := newSource(t, body, "good", false)
	cfg := fastConfig(t)
	cfg.MaxBytes = 4000
	c := open(t, cfg)
	err := c.Pull(context.Background(), imagecache.Image{URL: src.URL(), SHA256: sha256.Sum256(body)})
	if !errors.Is(err, imagecache.ErrTooLarge) {
		t.Fatalf("Pull: %v, want ErrTooLarge", err)
	}
	if f := allFiles(t, cfg.Dir); len(f) != 0 {
		t.Errorf("files left: %v", f)
	}
}

// Shutdown cancels a pull stuck on a stalled source and keeps its partial copy for a resume.
func TestShutdownCancelsPulls(t *testing.T) {
	body := randomBytes(5, 1<<20)
	src := newSource(t, body, "stall", false)
	cfg := fastConfig(t)
	cfg.StallTimeout = time.Hour
	c, err := imagecache.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	img := imagecache.Image{URL: src.URL(), SHA256: sha256.Sum256(body)}
	c.SetPinned([]imagecache.Image{img})
	var st imagecache.Status
	for range 2500 {
		if st = c.Status()[0]; st.Bytes == int64(len(body)/2) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if st.State != imagecache.StateWarming || st.Bytes != int64(len(body)/2) || st.Total != int64(len(body)) {
		t.Errorf("Status while stalled = %v %d/%d, want warming %d/%d", st.State, st.Bytes, st.Total, len(body)/2, len(body))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := c.Pull(context.Background(), img); !errors.Is(err, imagecache.ErrServerClosed) {
		t.Errorf("Pull after Shutdown: %v, want ErrServerClosed", err)
	}
	// The partial copy stays, for the next Open to resume; nothing is visible.
	wantFiles := []string{".pull-" + img.SHA256.String(), ".pull-" + img.SHA256.String() + ".meta"}
	if diff := cmp.Diff(wantFiles, allFiles(t, cfg.Dir)); diff != "" {
		t.Errorf("files left (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(filepath.Join(cfg.Dir, wantFiles[0])); err != nil || fi.Size() != int64(len(body)/2) {
		t.Errorf("partial copy: %v, want %d bytes", err, len(body)/2)
	}
	if st := c.Status(); st[0].State != imagecache.StateFailed || !errors.Is(st[0].Err, imagecache.ErrServerClosed) {
		t.Errorf("Status after Shutdown: %v %v", st[0].State, st[0].Err)
	}
}

func TestInvalidImages(t *testing.T) {
	c := open(t, fastConfig(t))
	d := imagecache.Digest(sha256.Sum256([]byte("x")))
	for _, img := range []imagecache.Image{
		{URL: "http://h/x"},
		{URL: "file:///etc/passwd", SHA256: d},
		{URL: "http://h/x", SHA256: d, Format: "Bad Format"},
		{URL: "http://h/x", SHA256: d, Format: strings.Repeat("a", 33)},
	} {
		if err := c.Pull(context.Background(), img); !errors.Is(err, imagecache.ErrBadImage) {
			t.Errorf("Pull(%+v) = %v, want ErrBadImage", img, err)
		}
	}
}
