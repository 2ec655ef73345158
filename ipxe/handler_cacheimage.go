package ipxe

import "strings"

// cacheImagePrefix marks a Config.Kernel or Config.Initrds value that names a cache image.
const cacheImagePrefix = "cache:"

// CacheImage names the cache image with this sha256 as Config.Kernel or one of
// Config.Initrds: the handler then fetches it under the machine's own boot grant, as the
// bc.cache URL plus the digest, so the site's ramdisk is served only to machines being
// booted, and only while the fence is active. It needs Config.Cache.
func CacheImage(sha256 string) string { return cacheImagePrefix + sha256 }

// resolveImage turns a CacheImage name into its URL under the boot grant cache (the bc.cache
// value, ending in "/"); other values are returned as they are.
func resolveImage(field, v, cache string) (string, error) {
	sha, ok := strings.CutPrefix(v, cacheImagePrefix)
	if !ok {
		return v, nil
	}
	if !isSHA256(sha) {
		return "", invalidErr(field, "a cache image is 64 lower-case hex digits")
	}
	if cache == "" {
		return "", invalidErr(field, "a cache image needs a cache URL")
	}
	return strings.TrimSuffix(cache, "/") + "/" + sha, nil
}
