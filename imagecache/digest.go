package imagecache

import (
	"encoding/hex"
	"fmt"
	"net/url"
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
// host serving sanboot checks it is "iso"), and the priority of its pull.
type Image struct {
	URL    string
	SHA256 Digest
	Format string
	// Priority orders the image's pull against others waiting for a slot. Zero: by role
	// (PriorityPinned when named in SetPinned, else PriorityRest; PriorityBoot for the
	// digests in Config.BootImages).
	Priority Priority
}

var formatRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,31}$`)

// Validate reports whether the image can be pulled: an http or https URL, a non-zero digest,
// and a format of at most 32 characters from [a-z0-9._-] (or none).
func (img Image) Validate() error {
	if img.SHA256.IsZero() {
		return fmt.Errorf("%w: no sha256", ErrBadImage)
	}
	u, err := url.Parse(img.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: url is not an http or https URL with a host", ErrBadImage)
	}
	if img.Priority < PriorityDefault || img.Priority > PriorityBoot {
		return fmt.Errorf("%w: priority %d", ErrBadImage, int(img.Priority))
	}
	if img.Format != "" && !formatRE.MatchString(img.Format) {
		return fmt.Errorf("%w: format %q", ErrBadImage, img.Format)
	}
	return nil
}
