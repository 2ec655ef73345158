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
	"sync/atomic"
	"syscall"
	"time"
)

const copyBufferSize = 1 << 20

// errRangeRefused is a resume the source answered with a Range it was not asked for, or
// under another validator: the partial copy is dropped and the next attempt starts over.
var errRangeRefused = errors.New("imagecache: source answered a different range")

// errPreempted ends an attempt whose pull slot was taken for a pull of higher priority. It
// is not a failure: the pull waits for a slot again and resumes where it stopped.
var errPreempted = errors.New("imagecache: pull slot taken by a higher priority")

// errYielded ends an attempt that held its slot for a rate window while another pull of
// the same or a higher priority waited, from a source that can resume: the pull goes to
// the back of the queue and resumes by Range later. Not a failure either.
var errYielded = errors.New("imagecache: pull slot given to a waiting pull")

// validator is what a source said identifies the version of the bytes it sent: a resume
// asks for the rest of that version only (If-Range).
type validator struct {
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
}

// maxValidator bounds a validator kept from a source's answer.
const maxValidator = 256

// cleanValidator keeps a source's ETag and Last-Modified only when they can go back into
// an If-Range header as they are: at most maxValidator bytes of visible ASCII and inner
// spaces. Anything else (a hostile or broken source) is dropped, and a resume then rests on
// the digest alone.
func cleanValidator(v validator) validator {
	ok := func(s string) bool {
		if len(s) > maxValidator || strings.TrimSpace(s) != s {
			return false
		}
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] > 0x7e {
				return false
			}
		}
		return true
	}
	if !ok(v.ETag) {
		v.ETag = ""
	}
	if !ok(v.LastModified) {
		v.LastModified = ""
	}
	return v
}

// ifRange returns the If-Range value for a resume: a strong ETag, else the Last-Modified
// date, else "" (the digest alone then decides whether the joined copy is good).
func (v validator) ifRange() string {
	if v.ETag != "" && !strings.HasPrefix(v.ETag, "W/") {
		return v.ETag
	}
	return v.LastModified
}

// slotFunc waits for a pull slot; the returned context ends when the slot is taken back
// (with errPreempted as its cause), release gives the slot up, and others reports whether
// a pull of the same or a higher priority waits for a slot. again keeps the pull's place in
// the queue (after a preemption); otherwise it goes to the back.
type slotFunc func(ctx context.Context, again bool) (actx context.Context, release func(), others func() bool, err error)

// transfer streams one image into an open file, hashing every byte as it is written, and
// resumes with a Range request (If-Range on the source's validator) after a failed
// attempt, or after a restart when the file already holds a prefix.
type transfer struct {
	client   *http.Client
	url      string
	want     Digest
	f        *os.File
	h        hash.Hash
	n        int64 // bytes written to f and hashed
	total    int64 // full size when the source said, else -1
	resumed  bool  // some bytes came from a resumed attempt or an earlier process
	val      validator
	stall    time.Duration
	limit    int64 // largest image accepted; 0: none
	progress func(n, total int64)
	buf      []byte

	// minRate (bytes/s) ends an attempt that received less than minRate*rateWindow in a
	// rateWindow (ErrTooSlow, retried); with timeout it also bounds the whole pull's active
	// time to timeout + size/minRate (ErrDeadline). Zero: no rate check, no deadline.
	minRate    int64
	rateWindow time.Duration
	timeout    time.Duration
	active     time.Duration // time spent in attempts and back-offs so far

	// slots, when set, is asked for a slot before each attempt and released after it.
	slots slotFunc
	// others, while an attempt holds a slot, reports whether another pull waits for one.
	others func() bool
	// prepare runs once, holding the first slot, before the first attempt (restoring a
	// partial copy's hash state).
	prepare func(*transfer) error
	// started runs after a response's headers were accepted and before its first body byte
	// is written: fresh is true when the copy starts over from byte 0.
	started func(t *transfer, fresh bool) error
	// check refuses a request URL before it is sent (image source policy).
	check func(url string) error

	yields int
}

func newTransfer(client *http.Client, url string, want Digest, f *os.File, stall time.Duration, limit int64) *transfer {
	return &transfer{client: client, url: url, want: want, f: f, h: sha256.New(), total: -1, stall: stall, limit: limit}
}

// reset drops the partial copy.
func (t *transfer) reset() error {
	t.h.Reset()
	t.n = 0
	t.resumed = false
	t.val = validator{}
	if err := t.f.Truncate(0); err != nil {
		return err
	}
	_, err := t.f.Seek(0, io.SeekStart)
	return err
}

// restore hashes the bytes the file already holds and continues after them.
func (t *transfer) restore(ctx context.Context) error {
	if _, err := t.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	t.h.Reset()
	if t.buf == nil {
		t.buf = make([]byte, copyBufferSize)
	}
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		k, err := t.f.Read(t.buf)
		t.h.Write(t.buf[:k])
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	t.n = n
	t.resumed = n > 0
	return nil
}

// retryable reports whether another attempt may succeed after err.
func retryable(err error) bool {
	var se *StatusError
	switch {
	case errors.As(err, &se):
		return se.Temporary()
	case errors.Is(err, ErrDigestMismatch), errors.Is(err, ErrTooLarge), errors.Is(err, ErrNoSpace),
		errors.Is(err, ErrSourceRefused), errors.Is(err, ErrDeadline), errors.Is(err, ErrBadImage),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	// Network errors, stalls, too slow, short bodies, ranges refused.
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

// allowed is the active time a pull of this size may take: timeout + size/minRate.
func (t *transfer) allowed() time.Duration {
	size := max(t.total, t.n, 0)
	return t.timeout + time.Duration(float64(size)/float64(t.minRate)*float64(time.Second))
}

func (t *transfer) hasDeadline() bool { return t.minRate > 0 && t.timeout > 0 }

// run makes up to 1+retries attempts (an attempt preempted by a pull of higher priority
// does not count) and then checks the digest. It returns the number of attempts and nil
// when the file holds exactly the wanted bytes.
func (t *transfer) run(ctx context.Context, retries int, base, max time.Duration) (int, error) {
	attempts := 0
	again := false
	for {
		actx, release := ctx, func() {}
		t.others = nil
		if t.slots != nil {
			var err error
			if actx, release, t.others, err = t.slots(ctx, again); err != nil {
				return attempts, err
			}
		}
		if t.prepare != nil {
			err := t.prepare(t)
			t.prepare = nil
			if err != nil {
				release()
				return attempts, err
			}
		}
		start := time.Now()
		err := t.attempt(actx)
		t.active += time.Since(start)
		preempted := err != nil && errors.Is(context.Cause(actx), errPreempted) && ctx.Err() == nil
		yielded := err != nil && errors.Is(err, errYielded) && ctx.Err() == nil
		release()
		if preempted || yielded {
			if yielded {
				t.yields++
			}
			again = preempted
			continue
		}
		again = false
		attempts++
		if err == nil {
			var got Digest
			t.h.Sum(got[:0])
			if got == t.want {
				return attempts, nil
			}
			// Never the digest of what came: a source must not learn a file's hash from us.
			err = &MismatchError{Digest: t.want, Bytes: t.n}
			if !t.resumed || attempts > retries {
				return attempts, err
			}
			// A resumed copy may have joined two versions of a changing source, or a prefix
			// left by an earlier process may be damaged: one more try from the start before
			// calling the bytes wrong.
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
		wait := backoff(base, max, attempts)
		if t.hasDeadline() && t.active+wait > t.allowed() {
			return attempts, fmt.Errorf("%w: %v for %d bytes (%v + size at %d bytes/s): %w",
				ErrDeadline, t.active.Round(time.Millisecond), max64(t.total, t.n), t.timeout, t.minRate, err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return attempts, context.Cause(ctx)
		case <-timer.C:
		}
		t.active += wait
	}
}

func max64(a, b int64) int64 { return max(a, b) }

// attempt makes one request, resuming at t.n with a Range when bytes are already there.
func (t *transfer) attempt(parent context.Context) (err error) {
	if t.check != nil {
		if err := t.check(t.url); err != nil {
			return err
		}
	}
	if t.total >= 0 && t.n == t.total && t.n > 0 {
		// A whole copy left by an earlier process: only the digest check is left.
		return nil
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	stall := time.AfterFunc(t.stall, func() { cancel(ErrStalled) })
	defer stall.Stop()
	var received atomic.Int64
	var rate *time.Timer
	defer func() {
		if rate != nil {
			rate.Stop()
		}
	}()
	defer func() {
		// An error caused by one of the timers reads as that timer's, whatever layer saw it.
		if err == nil || parent.Err() != nil {
			return
		}
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, ErrStalled):
			err = fmt.Errorf("%w: nothing for %v from %s", ErrStalled, t.stall, t.url)
		case errors.Is(cause, ErrTooSlow), errors.Is(cause, ErrDeadline), errors.Is(cause, errYielded):
			err = cause
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
		if v := t.val.ifRange(); v != "" {
			req.Header.Set("If-Range", v)
		}
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()

	got := cleanValidator(validator{ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified")})
	fresh := false
	switch {
	case resp.StatusCode == http.StatusOK:
		// From byte 0: the source ignored the Range, or the validator changed (If-Range).
		if t.n > 0 {
			if err := t.reset(); err != nil {
				return err
			}
		}
		fresh = true
		t.total = -1
		if resp.ContentLength >= 0 {
			t.total = resp.ContentLength
		}
		t.val = got
	case resp.StatusCode == http.StatusPartialContent && t.n > 0:
		start, end, size, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != t.n || (size >= 0 && end != size-1) {
			return fmt.Errorf("%w: asked from %d, got %q", errRangeRefused, t.n, resp.Header.Get("Content-Range"))
		}
		if (t.val.ETag != "" && got.ETag != "" && got.ETag != t.val.ETag) ||
			(t.val.ETag == "" && t.val.LastModified != "" && got.LastModified != "" && got.LastModified != t.val.LastModified) {
			return fmt.Errorf("%w: the source's validator changed", errRangeRefused)
		}
		if t.total >= 0 && size >= 0 && size != t.total {
			return fmt.Errorf("%w: size %d, was %d", errRangeRefused, size, t.total)
		}
		t.total = size
		t.resumed = true
		if t.val == (validator{}) {
			t.val = got
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && t.n > 0:
		var sum Digest
		if t.h.Sum(sum[:0]); sum == t.want {
			return nil // the copy was whole already
		}
		return fmt.Errorf("%w: 416 for bytes=%d-", errRangeRefused, t.n)
	default:
		return &StatusError{URL: t.url, Code: resp.StatusCode}
	}
	if t.limit > 0 && t.total > t.limit {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, t.total, t.limit)
	}
	if t.started != nil {
		if err := t.started(t, fresh); err != nil {
			return err
		}
	}
	if t.buf == nil {
		t.buf = make([]byte, copyBufferSize)
	}
	if t.progress != nil {
		t.progress(t.n, t.total)
	}
	if t.minRate > 0 && t.rateWindow > 0 {
		// Every rateWindow: fewer than minRate*rateWindow bytes ends the attempt (the slot
		// goes to whoever waits; the pull resumes later), and so does the pull's deadline.
		need := int64(float64(t.minRate) * t.rateWindow.Seconds())
		startActive, began, n0, total0, others := t.active, time.Now(), t.n, t.total, t.others
		// Only a source that can resume gives its slot up for a waiting pull: one without
		// Range support would start over each time.
		resumable := resp.StatusCode == http.StatusPartialContent || strings.EqualFold(resp.Header.Get("Accept-Ranges"), "bytes")
		// The timer goroutine reads only these copies and the atomic count.
		allowedAt := func(received int64) (time.Duration, int64) {
			size := max(total0, n0+received)
			return t.timeout + time.Duration(float64(size)/float64(t.minRate)*float64(time.Second)), size
		}
		var last int64
		check := func() {
			cur := received.Load()
			spent := startActive + time.Since(began)
			limit, size := allowedAt(cur)
			switch {
			case t.hasDeadline() && spent > limit:
				cancel(fmt.Errorf("%w: %v for %d bytes (%v + size at %d bytes/s)", ErrDeadline, spent.Round(time.Millisecond), size, t.timeout, t.minRate))
			case cur-last < need:
				cancel(fmt.Errorf("%w: %d bytes in %v from %s, minimum %d bytes/s", ErrTooSlow, cur-last, t.rateWindow, t.url, t.minRate))
			case resumable && others != nil && others():
				cancel(errYielded)
			default:
				last = cur
				rate.Reset(t.rateWindow)
			}
		}
		rate = time.AfterFunc(time.Duration(1<<62), check)
		rate.Reset(t.rateWindow) // armed only once rate is set, which check uses

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
			received.Add(int64(k))
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
