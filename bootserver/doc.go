// Package bootserver composes a boot server from the library's packages: proxy DHCP
// (proxydhcp), TFTP (tftpd), the /boot/ handler (ipxe), the image cache's grants
// (imagecache), the binding of each script request to the DHCP answer it follows
// (bootbind) and the signed discovery assertions (assertion), all gated by one fence. It
// is the composition every host writes, kept in the library as danderson/netboot keeps
// pixiecore.Server, so that an embedder gets the reference agent's protections without
// copying them out of an example.
//
// # Adapters
//
// Each adapter implements one of ipxe's host interfaces over another package, and can be
// used without a [Server]:
//
//   - [Cache] is an ipxe.Cache over an *imagecache.Cache: one boot grant per MAC and
//     workflow ([GrantKey]) reused until the entry's NotAfter, bc.cache under a base URL
//     (IPv4 or IPv6 by the connection's family, [ViaIPv6]), ISO readiness and the sanboot
//     URL.
//   - [Signer] is an ipxe.Signer over an *assertion.Issuer.
//   - [Bind] is an ipxe.Entries around the host's own lookup that gives an entry only to
//     a request bound to the DHCP answer it follows ([bootbind.Nonces.Claim]); any other
//     gets an error wrapping ipxe.ErrUnbound and bootbind's *RefusedError, and no entry.
//   - [FS] is the TFTP file system: the iPXE builds, cached images under a grant as
//     t/GRANT/SHA256, and mounts of other loaders' files.
//   - [ByFamily] serves /boot/ with one handler for IPv4 and another, whose URLs are
//     IPv6 ones, for requests that came over IPv6.
//   - [Entries] is proxy DHCP's Handler and the /boot/ handler's ipxe.Entries over a
//     sitelink.EntryStore: a live entry only for the machine it names (S3), the refusals
//     counted and emitted, the Secure Boot chain's answer for a Secure Boot machine.
//   - [BMCImages] is a sitelink.BMCImages over the cache: a firmware grant per BMC
//     command's image.
//   - [CacheImages], [ImageReports] and [Discovered] turn the link's messages into the
//     cache's images and the cache and discovery list into a status report's.
//   - [LinkSync] is the boot server's part of an agent's heartbeat over sitelink: the
//     report's cache, section and discovery list (sent only when it changed), the pinned
//     images of the answer, and what applied entries end.
//   - [Tokens] is an ipxe.Tokens over the link; [DiscoveredDHCP] and [DiscoveredHTTP] list
//     unknown machines in a discovery.List; [SyslogTarget] points iPXE's console at a
//     syslog receiver.
//   - [OwnBootFiles] is proxy DHCP's table for siteboot's own iPXE builds (ipxebin), and
//     [FirmwareCipherSuites] the HTTPS side's suites for UEFI firmware.
//
// # Server
//
// [New] takes components already built (a *proxydhcp.Server, a *tftpd.Server, an
// *imagecache.Cache) and the boot handler's ipxe.Config, and wires them: the one [Fence]
// on every part, the boot nonces as proxy DHCP's Binder and as the handler's binding, the
// Signer over the Issuer, the Cache adapter under BaseURL/cache, the TFTP [FS], and the
// HTTP mux of /boot/ and /cache/ (plus the host's own handlers) behind ipxe.NewServer's
// limits. With Config.BaseURL6 a second boot handler answers the requests that came over
// IPv6 with IPv6 URLs ([ByFamily]); Config.Passes and Config.Loaders bind the requests
// that carry no chain nonce (an IPv6 boot pass, a signed GRUB's key); each answer proxy
// DHCP gives a machine's firmware issues the MAC's pass. [Server.Serve] serves on the
// sockets the embedder bound ([Listeners]) until
// [Server.Shutdown] or [Server.Close], then returns [ErrServerClosed], like net/http. No
// goroutine of the Server outlives Shutdown or Close. [Server.Stats] gathers each part's
// counters.
//
// The host keeps what is its own: which machines proxy DHCP answers (proxydhcp.Handler),
// their entries (ipxe.Entries, which the Server wraps with [Bind]), their discovery
// tokens, the lease behind the fence, and the cache's life: the Server neither opens nor
// closes the cache, whose Config.Fence the host sets to the same fence.
//
// # HTTPS
//
// Listeners.HTTPS, under Config.TLS (sitetls.Credentials.OpenServerConfig re-reads the
// certificate and sends its CA, which iPXE checks by fingerprint), serves the same handlers
// over TLS. With an https BaseURL, New sets proxy DHCP's HTTPSPort, so iPXE is handed its
// chain over https and every URL in the scripts is https. Config.RefusePlainHTTP answers
// plain requests with 403, counted in [Stats].PlainRefused (exported as
// boot_plain_http_refused_total by [Server.Samples]), except the iPXE builds under
// /boot/files/, which UEFI HTTP boot fetches before anything trusts the site CA.
//
// # Security
//
// With proxy DHCP, a script carrying a secret (a discovery token, a cache grant, a signed
// assertion) goes only to the address the DHCP answer and its boot nonce went to (DESIGN.md
// S1; bootbind's doc says who can still do what). Without proxy DHCP (Config.DHCP nil)
// there is no answer to bind to, and the host's lookup decides alone, as in the reference
// agent. Every part refuses while the fence is inactive.
//
// # Limits
//
// The Server adds no limits of its own: each part keeps its own (proxydhcp's workers,
// tftpd's transfers, ipxe's header cap and timeouts, imagecache's grant table, bootbind's
// bounded stores). It has no ListenAndServe: port 67 wants a socket bound to the segment's
// interface (udpbind), which the embedder chooses. [Listeners.Listen] binds the sockets
// at the addresses and on the interface the embedder names (keeping any it bound
// itself), [Listeners.Addrs] says where they are, and [Listeners.Close] closes them.
// [Addrs.Validate] (which Listen applies) refuses a dual-stack TFTP or HTTP address that
// is not a wildcard and a DHCPv6 address that is not IPv6. [Listeners.Bases] derives the
// base URLs and the ports proxy DHCP names from the ports the listeners got.
// [Listeners.Cap] puts the HTTP and HTTPS listeners behind connlimit, their caps derived
// from the process's descriptor budget less what proxy DHCP and TFTP need (DESIGN.md S4),
// with room kept for the machines being booted ([Config.Prefer]: where proxy DHCP's
// nonces go and where bound requests come from).
package bootserver
