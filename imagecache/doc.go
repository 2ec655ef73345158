// Package imagecache implements a content-addressed image cache for a network-boot site
// agent: images named by their SHA-256 are pulled in the background and become visible only
// once their bytes match, trimmed least-recently-used first under a byte budget that never
// evicts a pinned or in-use image, and served over HTTP only under unguessable grants.
//
// # Wiring
//
// Open a Cache on a directory, name the images the host wants with SetPinned (each is pulled
// in the background; Status reports warming, ready or failed with the reason), hand out
// grant URLs (BootGrant for a ramdisk's bc.cache, SanbootGrant for one ISO that iPXE reads by
// ranges, FirmwareGrant for a BMC firmware update), and mount the Cache, an http.Handler, at
// "/cache/" on the boot HTTP server. Shutdown cancels running pulls and waits for them.
//
// The ramdisk side uses a Fetcher: the cache URL first, the image's source URL as fallback,
// the digest checked on the stream either way, and the destination file renamed into place
// only after the digest matched.
//
// # Pulls
//
// A pull streams into a temp file in the cache directory (named ".pull-DIGEST-*"), hashing
// every byte as it is written; only when the digest matches is the file fsynced, renamed to
// its 64-hex-digit digest and the directory fsynced. Concurrent asks for one digest share one
// pull (singleflight) and at most Config.ConcurrentPulls run at once (a semaphore). A source
// that sends nothing for Config.StallTimeout, a short body, a network error or a 5xx/408/429
// is retried with exponential back-off, resuming with "Range: bytes=N-" when bytes are
// already there; a source that ignores the Range (200) restarts the copy, and one that
// answers another range is asked again from the start. A wrong digest, another status, a
// full disk (ErrNoSpace) or an image over Config.MaxBytes (ErrTooLarge) fail at once. Every
// failure is a *PullError wrapping the cause; no failed pull leaves a visible file.
//
// # Startup scan
//
// Open removes every leftover temp file and re-verifies every image file by hashing it (at
// Config.ConcurrentPulls files at a time); a file whose bytes do not match its name is
// removed. Open therefore costs one read of the cache (Go's SHA-256 uses SHA-NI where the
// CPU has it: about 1 GB/s per core measured by bench/imagecache on a loaded machine). This
// was chosen over trusting a recorded check so that a file damaged on disk or by hand is
// never served, at the price of a slower start for a large cache. Open also takes an exclusive flock on DIR/.lock, so two
// processes never share a directory.
//
// Image formats are not stored on disk: after a restart an image's Format is empty until the
// host names it again in SetPinned. Last-used times persist as the files' mtimes (updated at
// most once a minute while an image is served).
//
// # Eviction
//
// With Config.MaxBytes set, Trim (run after every pull and every SetPinned, and callable by
// the host) removes least-recently-used images until the cache fits, skipping pinned images
// (those the last SetPinned named) and images being served. A file removed while served
// would still be read to the end through its open descriptor, but the pass does not rely on
// that.
//
// # Grants and serving
//
// Only GET and HEAD of /cache/t/GRANT/SHA256 are served, GRANT being 128 bits from
// Config.Rand (crypto/rand by default) as 32 lower-case hex digits and SHA256 64 lower-case
// hex digits. Grants are looked up by the SHA-256 of the token sent, then compared in
// constant time. Every other path, a plain /cache/SHA256 too, an unknown, expired or revoked
// grant, a grant for another digest, and an image not cached, answer the same 404, so a
// client learns nothing about what is cached. A boot grant (any cached image, or one ISO)
// is valid until its not-after (6 h when none is given) and only while Config.Fence is
// active: otherwise 503. A firmware grant serves one digest for 2 h and ignores the fence.
// Expired grants are forgotten (swept at least once a minute when grants are issued, and on
// use); at most Config.MaxGrants live at once.
//
// Images are served by http.ServeContent over the *os.File, so ranges, If-Range, HEAD and
// conditional requests work as in net/http, with ETag set to the quoted digest, and full
// bodies and single ranges go out through sendfile.
//
// # Security notes
//
// A grant token is a bearer secret: it appears in iPXE scripts and kernel command lines of
// the machine it is for. Issue one grant per boot entry rather than one per script fetch:
// BootGrantFor and SanbootGrantFor return the live grant of a key (say the entry's MAC and
// workflow) again, and RevokeKey ends it with the entry. The table holds at most
// Config.MaxGrants live grants and refuses more with ErrGrantLimit, so a host minting a
// grant per request lets any client that can fetch a script exhaust it. A boot grant answers 503
// while fenced, which tells its holder that the grant itself is good; every other refusal is
// the same 404.
//
// Bytes are trusted only by digest: neither the cache's sources nor the cache itself can
// substitute an image for a Fetcher. The Fetcher's destination must be a regular file path
// on a writable file system (the temp file lives beside it so that the rename is atomic).
package imagecache
