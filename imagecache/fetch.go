package imagecache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// DefaultFetchRetries is Fetcher.Retries when zero: retries per URL before the next one.
const DefaultFetchRetries = 2

// Fetcher fetches one image by digest for a client of the cache, such as a ramdisk: the
// cache URL first, the source URL as fallback, the digest checked on the stream either way,
// so a cache (or a source) can never substitute an image. Its zero value is ready to use.
type Fetcher struct {
	// Client makes the requests. Nil: http.DefaultClient.
	Client *http.Client
	// StallTimeout ends an attempt when no byte came for this long. Zero: DefaultStallTimeout.
	StallTimeout time.Duration
	// Retries per URL (resuming with Range where allowed). Zero: DefaultFetchRetries;
	// negative: none.
	Retries int
	// RetryDelay and MaxRetryDelay bound the back-off between retries.
	// Zero: DefaultRetryDelay and DefaultMaxRetryDelay.
	RetryDelay, MaxRetryDelay time.Duration
	// MaxBytes refuses images larger than this. Zero: no limit.
	MaxBytes int64
	// Logger receives one line per URL that failed. Nil: discard.
	Logger *slog.Logger
}

// Fetch writes the image whose SHA-256 is d to the file dst, trying urls in order and
// skipping empty ones. The bytes go to a temp file beside dst, are hashed as they arrive,
// fsynced, and renamed to dst only when they match d: dst never holds unverified bytes. A
// URL whose bytes do not match is abandoned for the next. Fetch returns the URL that served
// the image, or a *FetchError naming why each URL failed.
func (f *Fetcher) Fetch(ctx context.Context, d Digest, dst string, urls ...string) (string, error) {
	if d.IsZero() {
		return "", fmt.Errorf("%w: no sha256", ErrBadImage)
	}
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	log := f.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retries := f.Retries
	switch {
	case retries == 0:
		retries = DefaultFetchRetries
	case retries < 0:
		retries = 0
	}
	stall := orDefault(f.StallTimeout, DefaultStallTimeout)
	base := orDefault(f.RetryDelay, DefaultRetryDelay)
	maxDelay := max(orDefault(f.MaxRetryDelay, DefaultMaxRetryDelay), base)

	fe := &FetchError{Digest: d}
	for _, u := range urls {
		if u == "" {
			continue
		}
		err := f.fetchOne(ctx, client, u, d, dst, stall, retries, base, maxDelay)
		if err == nil {
			return u, nil
		}
		fe.Attempts = append(fe.Attempts, FetchAttempt{URL: u, Err: err})
		log.Warn("imagecache: fetch failed", "sha256", d.String(), "url", u, "err", err)
		if ctx.Err() != nil || errors.Is(err, ErrNoSpace) {
			break
		}
	}
	if len(fe.Attempts) == 0 {
		fe.Attempts = append(fe.Attempts, FetchAttempt{Err: fmt.Errorf("%w: no url", ErrBadImage)})
	}
	return "", fe
}

func (f *Fetcher) fetchOne(ctx context.Context, client *http.Client, url string, d Digest, dst string, stall time.Duration, retries int, base, maxDelay time.Duration) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".fetch-*")
	if err != nil {
		return writeError(err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	t := newTransfer(client, url, d, tmp, stall, f.MaxBytes)
	if _, err := t.run(ctx, retries, base, maxDelay); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return writeError(err)
	}
	if err := tmp.Close(); err != nil {
		return writeError(err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	committed = true
	return syncDir(filepath.Dir(dst))
}
