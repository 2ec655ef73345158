package imagecache

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Digest is the SHA-256 of an image's bytes, the name it is cached and served under.
type Digest [32]byte

// ParseDigest parses 64 hexadecimal digits (either case), optionally prefixed by "sha256:".
func ParseDigest(s string) (Digest, error) {
	var d Digest
	s = strings.TrimPrefix(s, "sha256:")
	if len(s) != 2*len(d) {
		return Digest{}, fmt.Errorf("%w: want 64 hex digits, got %d characters", ErrBadDigest, len(s))
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return Digest{}, fmt.Errorf("%w: %w", ErrBadDigest, err)
	}
	return d, nil
}

// String returns the digest as 64 lower-case hexadecimal digits.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// IsZero reports whether d is the zero digest (no digest given).
func (d Digest) IsZero() bool { return d == Digest{} }

// parseLowerHex decodes exactly len(dst)*2 lower-case hex digits, the only spelling the
// handler accepts in a URL (one spelling per resource; anything else is 404).
func parseLowerHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

// Image names one image the host wants cached: where to pull it from, the digest its bytes
// must have, and its format (for example "raw", "qcow2", "iso"; informational, except that a
// host serving sanboot checks it is "iso").
type Image struct {
	URL    string
	SHA256 Digest
	Format string
}

var formatRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,31}$`)

// Validate reports whether the image can be pulled: an http or https URL, a non-zero digest,
// and a format of at most 32 characters from [a-z0-9._-] (or none).
func (img Image) Validate() error {
	if img.SHA256.IsZero() {
		return fmt.Errorf("%w: no sha256", ErrBadImage)
	}
	if !strings.HasPrefix(img.URL, "http://") && !strings.HasPrefix(img.URL, "https://") {
		return fmt.Errorf("%w: url %q is not http or https", ErrBadImage, img.URL)
	}
	if img.Format != "" && !formatRE.MatchString(img.Format) {
		return fmt.Errorf("%w: format %q", ErrBadImage, img.Format)
	}
	return nil
}
