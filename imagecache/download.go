package imagecache

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const copyBufferSize = 1 << 20

// errRangeRefused is a resume the source answered with a Range it was not asked for: the
// partial copy is dropped and the next attempt starts over.
var errRangeRefused = errors.New("imagecache: source answered a different range")

// transfer streams one image into an open temp file, hashing every byte as it is written, and
// resumes with a Range request after a failed attempt when the source allows it.
type transfer struct {
	client   *http.Client
	url      string
	want     Digest
	f        *os.File
	h        hash.Hash
	n        int64 // bytes written to f and hashed
	total    int64 // full size when the source said, else -1
	resumed  bool  // some bytes came from a resumed attempt
	stall    time.Duration
	limit    int64 // largest image accepted; 0: none
	progress func(n, total int64)
	buf      []byte
}

func newTransfer(client *http.Client, url string, want Digest, f *os.File, stall time.Duration, limit int64) *transfer {
	return &transfer{client: client, url: url, want: want, f: f, h: sha256.New(), total: -1, stall: stall, limit: limit}
}

// reset drops the partial copy.
func (t *transfer) reset() error {
	t.h.Reset()
	t.n = 0
	t.resumed = false
	if err := t.f.Truncate(0); err != nil {
		return err
	}
	_, err := t.f.Seek(0, io.SeekStart)
	return err
}

// retryable reports whether another attempt may succeed after err.
func retryable(err error) bool {
	var se *StatusError
	switch {
	case errors.As(err, &se):
		return se.Temporary()
	case errors.Is(err, ErrDigestMismatch), errors.Is(err, ErrTooLarge), errors.Is(err, ErrNoSpace),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	// Network errors, stalls, short bodies, ranges refused.
	return true
}

// backoff returns the wait before attempt number n (n >= 1 is the first retry): base doubled
// per retry, capped at max, with up to 25% random jitter removed so retries spread out.
func backoff(base, max time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	if d > 4 {
		d -= time.Duration(rand.Int64N(int64(d) / 4))
	}
	return d
}

// run makes up to 1+retries attempts and then checks the digest. It returns the number of
// attempts and nil when the file holds exactly the wanted bytes.
func (t *transfer) run(ctx context.Context, retries int, base, max time.Duration) (int, error) {
	attempts := 0
	for {
		attempts++
		err := t.attempt(ctx)
		if err == nil {
			var got Digest
			t.h.Sum(got[:0])
			if got == t.want {
				return attempts, nil
			}
			err = fmt.Errorf("%w: got %s", ErrDigestMismatch, got)
			if !t.resumed || attempts > retries {
				return attempts, err
			}
			// A resumed copy may have joined two versions of a changing source:
			// one more try from the start before calling the bytes wrong.
			if rerr := t.reset(); rerr != nil {
				return attempts, rerr
			}
		} else if !retryable(err) || attempts > retries {
			return attempts, err
		}
		if errors.Is(err, errRangeRefused) {
			if rerr := t.reset(); rerr != nil {
				return attempts, rerr
			}
		}
		timer := time.NewTimer(backoff(base, max, attempts))
		select {
		case <-ctx.Done():
			timer.Stop()
			return attempts, context.Cause(ctx)
		case <-timer.C:
		}
	}
}

// attempt makes one request, resuming at t.n with a Range when bytes are already there.
func (t *transfer) attempt(parent context.Context) (err error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	stall := time.AfterFunc(t.stall, func() { cancel(ErrStalled) })
	defer stall.Stop()
	defer func() {
		// An error caused by the stall timer reads as a stall, whatever layer saw it.
		if err != nil && errors.Is(context.Cause(ctx), ErrStalled) && parent.Err() == nil {
			err = fmt.Errorf("%w: nothing for %v from %s", ErrStalled, t.stall, t.url)
		}
	}()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadImage, err)
	}
	// Bytes as stored, never a transparently decoded stream: offsets must be the file's.
	req.Header.Set("Accept-Encoding", "identity")
	if t.n > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(t.n, 10)+"-")
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()

	switch {
	case resp.StatusCode == http.StatusOK:
		if t.n > 0 {
			// The source ignored the Range: start over from this full body.
			if err := t.reset(); err != nil {
				return err
			}
		}
		if resp.ContentLength >= 0 {
			t.total = resp.ContentLength
		}
	case resp.StatusCode == http.StatusPartialContent && t.n > 0:
		start, end, size, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != t.n || (size >= 0 && end != size-1) {
			return fmt.Errorf("%w: asked from %d, got %q", errRangeRefused, t.n, resp.Header.Get("Content-Range"))
		}
		t.total = size
		t.resumed = true
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && t.n > 0:
		return fmt.Errorf("%w: 416 for bytes=%d-", errRangeRefused, t.n)
	default:
		return &StatusError{URL: t.url, Code: resp.StatusCode}
	}
	if t.limit > 0 && t.total > t.limit {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, t.total, t.limit)
	}
	if t.buf == nil {
		t.buf = make([]byte, copyBufferSize)
	}
	if t.progress != nil {
		t.progress(t.n, t.total)
	}
	for {
		k, rerr := resp.Body.Read(t.buf)
		if k > 0 {
			stall.Reset(t.stall)
			if t.limit > 0 && t.n+int64(k) > t.limit {
				return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, t.limit)
			}
			if _, werr := t.f.Write(t.buf[:k]); werr != nil {
				return writeError(werr)
			}
			t.h.Write(t.buf[:k])
			t.n += int64(k)
			if t.progress != nil {
				t.progress(t.n, t.total)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if errors.Is(rerr, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: %d of %d bytes from %s", ErrShortBody, t.n, t.total, t.url)
			}
			return rerr
		}
	}
	if t.total >= 0 && t.n != t.total {
		return fmt.Errorf("%w: %d of %d bytes from %s", ErrShortBody, t.n, t.total, t.url)
	}
	return nil
}

// writeError marks a full file system so that it is not retried.
func writeError(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// parseContentRange parses "bytes START-END/SIZE" (SIZE may be "*", returned as -1).
func parseContentRange(s string) (start, end, size int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, sz, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	start, err1 := parseUint(a)
	end, err2 := parseUint(b)
	if err1 != nil || err2 != nil || end < start {
		return 0, 0, 0, false
	}
	size = -1
	if sz != "*" {
		n, err := parseUint(sz)
		if err != nil || end >= n {
			return 0, 0, 0, false
		}
		size = n
	}
	return start, end, size, true
}

func parseUint(s string) (int64, error) {
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(s, 10, 64)
}
