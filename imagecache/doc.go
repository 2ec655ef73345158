// Package imagecache implements a content-addressed image cache for a network-boot site
// agent: images named by their SHA-256 are pulled in the background and become visible only
// once their bytes match, trimmed least-recently-used first under a byte budget that never
// evicts a pinned or in-use image, and served over HTTP or TFTP only under unguessable
// grants.
//
// # Wiring
//
// Open a Cache on a directory (Config.BootImages naming the site's kernel and initrd,
// Config.ManagementNetworks the BMC networks, Config.AllowedSourceNetworks any network a
// source may be on that the source policy would refuse), name the images the host wants
// with SetPinned (each is pulled in the background; Status reports verifying, warming, ready
// or failed with the reason and the next retry), hand out grant URLs (BootGrant for a
// ramdisk's bc.cache, SanbootGrant for one ISO that iPXE reads by ranges, FirmwareGrant for
// a BMC firmware update), and mount the Cache, an http.Handler, at "/cache/" on the boot
// HTTP server. Open serves at once; images it could not take on their stamp are hashed in
// the background. Shutdown cancels running pulls and that pass, and waits for them.
//
// The ramdisk side uses a Fetcher: the cache URL first, the image's source URL as fallback,
// the digest checked on the stream either way, and the destination file renamed into place
// only after the digest matched.
//
// # Pulls
//
// A pull streams into its partial file in the cache directory (".pull-DIGEST"), hashing
// every byte as it is written; only when the digest matches is the file fsynced, renamed to
// its 64-hex-digit digest and the directory fsynced. Concurrent asks for one digest share one
// pull (singleflight). A source that sends nothing for Config.StallTimeout, a short body, a
// network error or a 5xx/408/429 is retried with exponential back-off, resuming with
// "Range: bytes=N-" when bytes are already there; a source that ignores the Range (200)
// restarts the copy, and one that answers another range is asked again from the start. A
// wrong digest, another status, a full disk (ErrNoSpace), an image over Config.MaxBytes
// (ErrTooLarge) or a refused source (ErrSourceRefused) fail at once. Every failure is a
// *PullError wrapping the cause; no failed pull leaves a visible file. A wrong digest is a
// *MismatchError ("digest mismatch") that names the digest asked for and the byte count,
// never the digest of what came.
//
// # Slots, rates and deadlines
//
// At most Config.ConcurrentPulls attempts run at once. A pull holds a slot for one attempt,
// not for its whole life: between attempts (a back-off, a source below the minimum rate)
// the slot goes to whoever waits. Waiting pulls go by Priority, then first come first
// served: PriorityBoot (the digests in Config.BootImages: the site's kernel and initrd),
// then PriorityPinned (images named in SetPinned), then PriorityRest (Pull alone); an
// Image's Priority field can raise its own. A waiter of higher priority than a running
// attempt takes that attempt's slot at once: the attempt ends (not counted as a failure) and
// its pull waits for a slot again and resumes by Range where it stopped. A waiter of the
// same priority gets the slot of an attempt that has held it for a RateWindow, when that
// attempt's source can resume (a 206, or "Accept-Ranges: bytes"): the slots go round robin
// among equals, and a long or slow pull never keeps the others waiting longer than that
// (Stats.Preemptions and Stats.Yields count both).
//
// An attempt that received fewer than Config.MinRate*Config.RateWindow bytes in a
// RateWindow (defaults: 32 KiB/s over 30 s) ends with ErrTooSlow and is retried like any
// failed attempt, from the back of the queue; so a source trickling a byte a second, under
// the stall timeout, holds a slot for at most one RateWindow at a time, and cannot keep
// the kernel, initrd or any other image waiting. Each pull also has a deadline,
// Config.PullTimeout (10 min) plus the image's size at MinRate, counted over its attempts
// and back-offs (not the time it waited for a slot): past it the pull fails with
// ErrDeadline, whatever retries are left. A negative PullTimeout turns the deadline off; a
// negative MinRate turns off the minimum rate, the deadline and the round robin.
//
// # Resume across restarts
//
// Beside the partial file, ".pull-DIGEST.meta" records what a resume needs: the URL, the
// source's validator (ETag, else Last-Modified) and the full size, written atomically
// before the first byte of a response from byte 0. The partial file and its record survive
// a crash, Shutdown and a failed attempt that may succeed later (they are removed when the
// bytes cannot be right: a digest mismatch, a 4xx, a full disk, a refused source; and by
// SetPinned for an image no longer named). The next pull of that digest, in this process or
// the next, hashes the prefix again (the hash state is not stored: the bytes on disk are
// what is trusted) and continues with "Range: bytes=N-" and "If-Range" on the validator
// (a strong ETag, else the Last-Modified date). The origin's full answer (200: it ignores
// Range, or the validator changed) starts the copy over; a 206 under another validator or
// size does too. When the joined copy does not match the digest (a prefix damaged on disk,
// a source without validator that changed), the pull starts over from byte 0 once before
// it fails. Partial copies of failed pulls count against Config.MaxBytes and are the first
// thing Trim removes (see Eviction); SetPinned removes those of images it no longer names.
//
// # Image sources
//
// Sources are http or https URLs only. A source on a loopback, link-local, unspecified
// (0.0.0.0/8, ::), multicast or broadcast address, on one of the host's own addresses (its
// interfaces, read at each check) or in Config.ManagementNetworks (the BMC networks) is
// refused with a *SourceError (ErrSourceRefused, not retried), unless
// Config.AllowedSourceNetworks holds the address. An IPv6 address that embeds an IPv4
// address (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, translated
// ::ffff:0:a.b.c.d, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16) is refused when
// the IPv4 address is: [::127.0.0.1] is loopback. The check runs in the dialer's Control
// function, on the address the name resolved to, just before the connection is made: a
// DNS answer or a redirect to a refused address reaches nothing. Redirects are also checked
// for their scheme and literal address, and at most 10 are followed. The cache's own client
// dials directly (no proxy from the environment, whose address would be the one checked).
// A host's Config.Client is copied: its *http.Transport is cloned with the dialer guarded
// (its own DialContext is wrapped, the peer's address checked once connected and before a
// byte is sent); with a proxy set, the proxy is what the check sees; a transport that is not
// an *http.Transport can only have its URLs and redirects checked.
//
// # Startup
//
// Open reads no image. It removes the temp files of interrupted writes (an older version's
// ".pull-DIGEST-*", a partial file without its record, a record or stamp whose file is gone,
// the ".tmp-*" files of an interrupted stamp or record write), keeps partial copies with
// their record for a resume, and takes an exclusive lock on DIR/.lock (flock(2) on Unix
// systems, LockFileEx on Windows), so two processes never share a directory. It then serves at once every image whose verification stamp
// matches the file; the others are hashed again in the background, one at a time, boot
// images first, then pinned ones, then the smallest, and served (and stamped) once they
// match; a file whose bytes do not match its name is removed. Until then such an image is
// StateVerifying and answers the same 404 as an image not cached; WaitVerified waits for
// the pass to end.
//
// The stamp (".stamp-DIGEST", written atomically after every pull and every verification,
// and again when serving moves the file's mtime) records the file's size, mtime, ctime,
// inode and device. This was chosen over hashing every image at every start: a restart
// then costs one stat per image instead of one read of the whole cache (minutes for a
// 100 GiB cache, during which nothing could boot), and the stamp cannot match a file that
// was replaced (a new inode), written or truncated (mtime, size), or whose times were put
// back by hand (ctime, which only the kernel sets). What it does not catch is damage below
// the file system (a bad disk block under an unchanged inode): a ramdisk's Fetcher still
// refuses such bytes (it checks the digest of every stream, C7), iPXE's fetch of a kernel
// would not. A host that wants every image hashed at every start anyway sets
// Config.IgnoreStamps (still in the background, boot images first). A missing or stale
// stamp costs one hash of that image, never a wrong byte served.
//
// Stamps are written on Linux, macOS, FreeBSD and NetBSD, whose file information carries an
// inode and a change time. Elsewhere (Windows) no stamp is written and every image found at
// Open is hashed again before it is served, as with IgnoreStamps.
//
// Image formats are not stored on disk: after a restart an image's Format is empty until the
// host names it again in SetPinned. Last-used times persist as the files' mtimes (updated at
// most once a minute while an image is served).
//
// # Failed images
//
// A pinned image whose pull failed is pulled again by the cache itself after
// Config.RetryFailedAfter (30 s), the wait doubling with each consecutive failure up to
// Config.MaxRetryFailedAfter (15 min); SetPinned does not retry it sooner. The wait is
// kept on both of Config.Clock's readings: the retry is due when its wall clock reaches
// NextRetry or when the wait has passed on its monotonic reading, so a wall clock stepped
// back delays no retry; the retry timer is the Clock's AfterFunc, so a test moves it with
// clocktest.Fake. Transfers (back-off between attempts, stall and rate checks, the pull
// deadline) keep to the process's clock, like socket deadlines. Status reports
// the failure (Err, a *PullError; Reason gives a stable word for it), the count of
// consecutive failures and when the next pull is due.
//
// # Eviction
//
// With Config.MaxBytes set, Trim (run after every pull, every failure that keeps a partial
// copy and every SetPinned, and callable by the host) counts the cached images and the
// partial copies of failed pulls (an origin that sends less than its Content-Length leaves
// one each time), removes partial copies first (those of unpinned images, then the oldest
// failures; never one a pull is writing), then least-recently-used images until the cache
// fits, skipping pinned images (those the last SetPinned named) and images being served. A file removed while served
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
// bodies and single ranges go out through sendfile. A Range header's ranges are first
// sorted and merged where they overlap, touch or lie less than 128 bytes apart, so that a
// grant holder cannot have one part of an image sent many times over in one answer; more
// than MaxRanges (16) ranges left after merging answer 416 (counted in
// Stats.RefusedRanges).
//
// # Serving over TFTP (or anything else)
//
// OpenGranted opens an image for the holder of a grant under the same rules, in the same
// code as ServeHTTP: a File (an fs.File, io.ReadSeeker and io.ReaderAt of a known size) that
// keeps the image from being trimmed until it is closed, or a *GrantError whose Refusal says
// why not (malformed, unknown-grant, expired, other-digest, not-cached, fenced), counted in
// Stats as ServeHTTP's refusals are. GrantFS is the same as an fs.FS of the names
// t/GRANT/SHA256, the paths ServeHTTP serves below "/cache/": give it to tftpd.Server's FS
// (or route a prefix to it from the host's own fs.FS) and the machine fetches
// tftp://SERVER/t/GRANT/SHA256 under the grant its script carries, with no HTTP request
// made up on the way. A refusal reads as fs.ErrNotExist ("file not found" on the wire), or
// as fs.ErrPermission while fenced ("access violation"); tftpd's Transfer report carries the
// GrantError. A File hands its descriptor to a sender that asks for it (SyscallConn), so
// tftpd sends it with preadv(2) or from a shared mapping, as it does files of a directory.
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
// the same 404 (over TFTP: "file not found", fenced "access violation"). A GrantError never
// holds the token, but an fs.PathError from GrantFS names the file asked for, token
// included, as fs.FS requires: a host logs it only where it would log the request itself.
//
// Bytes are trusted only by digest: neither the cache's sources nor the cache itself can
// substitute an image for a Fetcher. The Fetcher's destination must be a regular file path
// on a writable file system (the temp file lives beside it so that the rename is atomic).
//
// # Testing
//
// Package imagecachetest is an origin for tests: it serves images by digest on loopback,
// with byte ranges, and imagecachetest.Loopback is what AllowedSourceNetworks must hold
// to pull from it.
package imagecache
