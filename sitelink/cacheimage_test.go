package sitelink_test

import (
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/sitelink"
)

func TestCacheImageValidate(t *testing.T) {
	good := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		im   sitelink.CacheImage
		want string // the field named, "" for none
	}{
		{sitelink.CacheImage{URL: "https://images.example.net/a", SHA256: good}, ""},
		{sitelink.CacheImage{URL: "ftp://images.example.net/a", SHA256: good}, "URL"},
		{sitelink.CacheImage{URL: "http:///a", SHA256: good}, "URL"},
		{sitelink.CacheImage{URL: "http://192.0.2.1/a", SHA256: strings.ToUpper(good)}, "SHA256"},
		{sitelink.CacheImage{URL: "http://192.0.2.1/a", SHA256: good[:63]}, "SHA256"},
	} {
		err := tc.im.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.HasPrefix(err.Error(), tc.want+":")) {
			t.Errorf("%+v: %v, want field %q", tc.im, err, tc.want)
		}
	}
}
