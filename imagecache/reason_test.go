package imagecache_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/bettercompute/siteboot/imagecache"
)

func TestReasonOf(t *testing.T) {
	wrap := func(err error) error {
		return &imagecache.PullError{URL: "http://origin.invalid/x", Attempts: 2, Err: fmt.Errorf("attempt 2: %w", err)}
	}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{wrap(imagecache.ErrDigestMismatch), "digest-mismatch"},
		{wrap(imagecache.ErrShortBody), "short-body"},
		{wrap(imagecache.ErrStalled), "stalled"},
		{wrap(imagecache.ErrTooSlow), "too-slow"},
		{wrap(imagecache.ErrDeadline), "deadline"},
		{wrap(imagecache.ErrSourceRefused), "source-refused"},
		{wrap(&imagecache.StatusError{URL: "http://origin.invalid/x", Code: 503}), "http-503"},
		{wrap(imagecache.ErrNoSpace), "no-space"},
		{wrap(imagecache.ErrTooLarge), "too-large"},
		{wrap(imagecache.ErrBadImage), "bad-image"},
		{wrap(imagecache.ErrServerClosed), "closed"},
		{wrap(io.ErrUnexpectedEOF), "network"},
		{fmt.Errorf("serving: %w", &imagecache.GrantError{Reason: imagecache.RefusedFenced}), "fenced"},
		{&imagecache.GrantError{Reason: imagecache.RefusedExpired}, "expired"},
	} {
		if got := imagecache.ReasonOf(tt.err); got != tt.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if got := imagecache.ReasonOf(errors.Join(imagecache.ErrTooSlow, imagecache.ErrDeadline)); got != "deadline" {
		t.Errorf("ReasonOf of a deadline among others = %q, want the deadline first", got)
	}
}
