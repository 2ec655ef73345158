package imagecache

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"strings"
)

// Sentinel errors. Test for them with errors.Is; the typed errors below wrap them.
var (
	// ErrServerClosed is returned by calls on a cache after Shutdown or Close, and wrapped
	// by the error of a pull they cancelled.
	ErrServerClosed = errors.New("imagecache: cache closed")
	// ErrBadDigest: a digest that is not 64 hex digits.
	ErrBadDigest = errors.New("imagecache: malformed sha256 digest")
	// ErrBadImage: an Image that fails Validate.
	ErrBadImage = errors.New("imagecache: malformed image")
	// ErrDigestMismatch: the bytes received do not hash to the digest asked for.
	ErrDigestMismatch = errors.New("imagecache: digest mismatch")
	// ErrShortBody: the source ended the body before the length it announced.
	ErrShortBody = errors.New("imagecache: short body")
	// ErrStalled: no byte arrived from the source within the stall timeout.
	ErrStalled = errors.New("imagecache: source stalled")
	// ErrTooSlow: an attempt received less than the minimum rate over a rate window; the
	// pull gives its slot up and resumes later.
	ErrTooSlow = errors.New("imagecache: source below the minimum rate")
	// ErrDeadline: the pull took longer than its deadline (Config.PullTimeout plus the
	// image's size at Config.MinRate).
	ErrDeadline = errors.New("imagecache: pull deadline passed")
	// ErrSourceRefused: the image source's address (or scheme) is not allowed; see
	// Config.AllowedSourceNetworks. Wrapped by *SourceError.
	ErrSourceRefused = errors.New("imagecache: image source refused")
	// ErrTooLarge: the image is larger than the configured limit.
	ErrTooLarge = errors.New("imagecache: image larger than the limit")
	// ErrNoSpace: the file system holding the cache is full (wraps ENOSPC or EDQUOT).
	ErrNoSpace = errors.New("imagecache: no space left for the image")
	// ErrGrantLimit: the grant table is full of live grants.
	ErrGrantLimit = errors.New("imagecache: too many live grants")
	// ErrBadGrant: a grant that cannot be issued (for example a not-after in the past).
	ErrBadGrant = errors.New("imagecache: bad grant request")
	// ErrLocked: another process holds the cache directory.
	ErrLocked = errors.New("imagecache: cache directory in use by another process")
)

// StatusError is a source's answer that was neither 200 nor the 206 a resume asked for.
type StatusError struct {
	URL  string
	Code int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("imagecache: %s answered %d %s", e.URL, e.Code, http.StatusText(e.Code))
}

// Temporary reports whether a later attempt may succeed (5xx, 408, 429).
func (e *StatusError) Temporary() bool {
	return e.Code >= 500 || e.Code == http.StatusRequestTimeout || e.Code == http.StatusTooManyRequests
}

// MismatchError is a copy whose bytes do not hash to the digest asked for. It names the
// wanted digest and how many bytes came, never the digest of what came: that would tell
// whoever chose the URL the hash of a file they could not read.
type MismatchError struct {
	Digest Digest // the digest asked for
	Bytes  int64  // bytes received
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("imagecache: digest mismatch: %d bytes received do not hash to %s", e.Bytes, e.Digest)
}

// Unwrap returns ErrDigestMismatch.
func (e *MismatchError) Unwrap() error { return ErrDigestMismatch }

// SourceError is an image source refused by the source policy: a URL that is not http or
// https, or a connection (or redirect) to an address the policy does not allow.
type SourceError struct {
	URL    string     // the URL refused, when the refusal is about a URL
	Addr   netip.Addr // the address refused, when it is about an address
	Reason string     // "scheme", "loopback", "link-local", "unspecified", "multicast", "own-address", "management-network", "too-many-redirects"
}

func (e *SourceError) Error() string {
	if e.Addr.IsValid() {
		return fmt.Sprintf("imagecache: image source address %s refused (%s)", e.Addr, e.Reason)
	}
	return fmt.Sprintf("imagecache: image source %q refused (%s)", e.URL, e.Reason)
}

// Unwrap returns ErrSourceRefused.
func (e *SourceError) Unwrap() error { return ErrSourceRefused }

// PullError is the failure of one image's pull after its last attempt.
type PullError struct {
	Digest   Digest
	URL      string
	Attempts int   // attempts made, retries included
	Err      error // the last attempt's error
}

func (e *PullError) Error() string {
	return fmt.Sprintf("imagecache: pull %s from %s failed after %d attempt(s): %v", e.Digest, e.URL, e.Attempts, e.Err)
}

func (e *PullError) Unwrap() error { return e.Err }

// FetchAttempt is one URL a Fetcher tried and why it was not used.
type FetchAttempt struct {
	URL string
	Err error
}

// FetchError is returned by Fetcher.Fetch when no URL gave bytes matching the digest.
type FetchError struct {
	Digest   Digest
	Attempts []FetchAttempt
}

func (e *FetchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "imagecache: fetch %s failed", e.Digest)
	for _, a := range e.Attempts {
		fmt.Fprintf(&b, "; %s: %v", a.URL, a.Err)
	}
	return b.String()
}

// Unwrap returns every attempt's error, so errors.Is finds any of them.
func (e *FetchError) Unwrap() []error {
	errs := make([]error, 0, len(e.Attempts))
	for _, a := range e.Attempts {
		errs = append(errs, a.Err)
	}
	return errs
}

var (
	_ error = &StatusError{}
	_ error = &PullError{}
	_ error = &FetchError{}
	_ error = &MismatchError{}
	_ error = &SourceError{}
)

// ReasonOf names why a pull failed or an image was refused, in a few stable words a host
// can report or count. A pull: "digest-mismatch", "short-body", "stalled", "too-slow",
// "deadline", "source-refused", "http-NNN", "no-space", "too-large", "bad-image",
// "closed" (ErrServerClosed), and "network" for any other failure (the source could not be reached or
// stopped answering). An image refused under a grant ([*GrantError]): its [Refusal]
// ("unknown-grant", "expired", "fenced", ...). "" for nil.
func ReasonOf(err error) string {
	var se *StatusError
	var ge *GrantError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ge):
		return string(ge.Reason)
	case errors.Is(err, ErrDeadline):
		return "deadline"
	case errors.Is(err, ErrDigestMismatch):
		return "digest-mismatch"
	case errors.Is(err, ErrShortBody):
		return "short-body"
	case errors.Is(err, ErrStalled):
		return "stalled"
	case errors.Is(err, ErrTooSlow):
		return "too-slow"
	case errors.Is(err, ErrSourceRefused):
		return "source-refused"
	case errors.As(err, &se):
		return fmt.Sprintf("http-%d", se.Code)
	case errors.Is(err, ErrNoSpace):
		return "no-space"
	case errors.Is(err, ErrTooLarge):
		return "too-large"
	case errors.Is(err, ErrBadImage):
		return "bad-image"
	case errors.Is(err, ErrServerClosed):
		return "closed"
	}
	return "network"
}

// Refusals of an image under a grant ([GrantError]).
var (
	// ErrNotGranted: the image is not served under this grant (any [Refusal]).
	ErrNotGranted = errors.New("imagecache: image not served under this grant")
	// ErrFenced: a boot grant while this agent is not the active boot server (ServeHTTP's
	// 503); wrapped by a GrantError with RefusedFenced, besides ErrNotGranted.
	ErrFenced = errors.New("imagecache: boot server inactive")
)

// Refusal says why an image was refused under a grant, in a word a host can count.
type Refusal string

// Refusals. All but RefusedFenced are ServeHTTP's 404.
const (
	RefusedMalformed    Refusal = "malformed"     // not TOKEN and SHA256 in lower-case hex (HTTP: not GET/HEAD /cache/t/TOKEN/SHA256)
	RefusedUnknownGrant Refusal = "unknown-grant" // no live grant has this token
	RefusedExpired      Refusal = "expired"       // the grant's not-after has passed
	RefusedOtherDigest  Refusal = "other-digest"  // the grant serves another image
	RefusedNotCached    Refusal = "not-cached"    // the image is not in the cache
	RefusedFenced       Refusal = "fenced"        // a boot grant while the Fence is inactive
)

// GrantError is an image refused under a grant. It never holds the token.
type GrantError struct {
	Reason Refusal
	Digest Digest // the image asked for; zero when the request was malformed
}

func (e *GrantError) Error() string {
	if e.Digest.IsZero() {
		return "imagecache: image refused: " + string(e.Reason)
	}
	return "imagecache: image " + e.Digest.String() + " refused: " + string(e.Reason)
}

// Unwrap returns ErrNotGranted and fs.ErrNotExist, or for RefusedFenced ErrNotGranted,
// ErrFenced and fs.ErrPermission: a file server (tftpd) tells the client "file not found"
// or "access violation" from them.
func (e *GrantError) Unwrap() []error {
	if e.Reason == RefusedFenced {
		return []error{ErrNotGranted, ErrFenced, fs.ErrPermission}
	}
	return []error{ErrNotGranted, fs.ErrNotExist}
}

var _ error = &GrantError{}
