package bootserver

import (
	"errors"
	"strings"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/sitelink"
)

// BMCImages is a sitelink.BMCImages over an *imagecache.Cache: a cached image under a
// firmware grant of its own (imagecache.Cache.FirmwareGrant, which the fence does not
// gate: BMC access goes on whether or not this agent holds the lease), at
// BaseURL/t/GRANT/SHA256.
type BMCImages struct {
	Cache   *imagecache.Cache
	BaseURL string // where BMCs reach the cache ("http://192.0.2.2/cache"); a trailing "/" is dropped
}

var _ sitelink.BMCImages = BMCImages{}

// Check refuses a malformed digest and an image that is not in the cache.
func (b BMCImages) Check(sum string) error {
	d, err := imagecache.ParseDigest(sum)
	if err != nil {
		return err
	}
	if _, ok := b.Cache.Lookup(d); !ok {
		return errors.New("image " + d.String() + " is not in the cache")
	}
	return nil
}

// Mint issues a firmware grant for the image and returns its URL and the grant.
func (b BMCImages) Mint(sum string) (url, grant string, err error) {
	d, err := imagecache.ParseDigest(sum)
	if err != nil {
		return "", "", err
	}
	g, err := b.Cache.FirmwareGrant(d)
	if err != nil {
		return "", "", err
	}
	return strings.TrimRight(b.BaseURL, "/") + "/t/" + g.Token + "/" + d.String(), g.Token, nil
}

// Revoke ends the grant.
func (b BMCImages) Revoke(grant string) { b.Cache.Revoke(grant) }
