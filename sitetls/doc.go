// Package sitetls implements mutual TLS (RFC 8446, TLS 1.3 only) between a site agent and
// its control plane (DESIGN.md G3): each side presents the certificate and key it loads
// from files and verifies the other against a configured CA bundle, and all three files are
// re-read when they change, so that a running server or client takes a renewed certificate
// (the seed's site certificates live 24 hours) without a restart and without a lapse.
//
// # Wiring
//
// [Load] reads a [Config] (CertFile, KeyFile, CAFile) into [Credentials]. The agent's side
// of the link uses [Credentials.ClientConfig], which presents the node certificate and
// verifies the control plane for the host name of its URL:
//
//	creds, err := sitetls.Load(sitetls.Config{CertFile: certPath, KeyFile: nodeKeyPath, CAFile: caPath})
//	u, _ := url.Parse(controlURL)
//	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
//		TLSClientConfig: creds.ClientConfig(u.Hostname())}}
//
// The control plane's side uses [Credentials.ServerConfig], which requires a client
// certificate that chains to the CA bundle, and [NodeFrom] in a handler to learn which node
// is calling:
//
//	srv := &http.Server{Handler: h, TLSConfig: creds.ServerConfig()}
//	go srv.ServeTLS(ln, "", "") // or srv.Serve(tls.NewListener(ln, srv.TLSConfig))
//	...
//	id, err := sitetls.NodeFrom(r) // in the handler: 403 unless id.Node is the report's node
//
// The site certificate is for the agent's node key: KeyFile may be the Ed25519 PKCS#8 file
// the agent already keeps. ECDSA (and RSA) keys work too. The sitetlstest package mints a
// CA and certificates for tests and labs.
//
// # The node's own certificate
//
// A node's certificate must be for its own identity and its node key: [LoadNode] refuses
// any other at start, and [CheckLeaf] says the same of the certificate in use at any time
// (ErrCertIdentity, ErrCertKey, ErrNoCredentials). A [Monitor] re-checks on the node's
// own schedule, after re-reading changed files, so that a renewal is taken and a bad one
// (another node's, a CA the peers do not trust) is reported by [Monitor.Health] and
// [Monitor.Untrusted] and logged once, while the last good pair stays in use.
//
// A boot server's certificate (served with [Credentials.OpenServerConfig]) must name the
// addresses its clients connect to ([Credentials.CheckAddrs], ErrCertAddress); a health page
// describes it with [Credentials.Report] and [CertReport.Health] (its public parts and
// fingerprint, an expiry within a warning, a file that does not load), and
// [Credentials.ServerSamples] exports its expiry.
//
// # Node identity
//
// A node certificate names its node by exactly one URI name, spiffe://SITE/agent/NODE
// ([Identity]), as SPIFFE X.509 identities do; the subject's common name is not read.
// A URI name is structured, is matched exactly, and is subject to the CA's URI name
// constraints, so a per-site intermediate CA permitted the URI domain SITE can mint
// identities for its own site only (crypto/tls refuses any other at the handshake); a
// common name is free text with none of that. SITE is
// 1 to 128 of [a-z0-9._-] (a trust domain is lower case), NODE 1 to 128 of [A-Za-z0-9._-].
// [NodeFrom] answers only from the leaf of a chain crypto/tls verified on that connection.
//
// # Reloading
//
// On a handshake, at most once per Config.CheckInterval (5 s by default) by the injected
// clock, the files' metadata (device, inode, size, modification and change time, mode) is
// compared with what was loaded (device, inode and change time on Linux only; elsewhere size,
// modification time and mode); a difference, or a failure last time, re-reads them. A
// host may also call [Credentials.Check] from a loop of its own (the agent's heartbeat).
// A new pair replaces the old only whole and valid: both files read, the key is the
// certificate's, the certificate is within its validity, and it chains to the CA bundle
// (Config.IssuerFile, else CAFile; the bundle this same check adopts when both changed), so
// that a certificate from a CA the peers do not trust is never adopted (ErrUntrustedCert). Otherwise the last good pair
// stays in use, the error (a *[FileError] naming the file) is logged once, returned by Check
// and kept in [Credentials.Status], and the next check tries again. The CA bundle is
// reloaded the same way, independently. A certificate and key replaced one after the other
// can be seen half-done; that check fails (ErrKeyMismatch), the old pair stays in use,
// and the next check loads the new pair. One file holding both (KeyFile == CertFile),
// replaced by rename, has no such moment.
//
// # Security
//
// Certificate and key files must grant nothing to group or others (mode & 0o077 == 0, such
// as 0600): any other mode is refused with ErrInsecureFile, at Load and on every reload (a
// chmod is a change), naming the file. A CA bundle may be readable by all but writable by
// its owner only, since whoever can write it decides whom this side trusts. Only regular
// files of at most [MaxFileBytes] are read; errors name files and never hold their content.
// Session tickets are off on the server and the client keeps no session cache, so every
// connection is verified against the CA bundle in use when it is made: a CA removed from
// the bundle stops admitting new connections within one check. Connections already open
// are not re-checked; a host that must cut them after a CA change closes them itself.
package sitetls
