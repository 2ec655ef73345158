// Package sitetlstest mints the certificates a test, a lab or an end-to-end run needs to
// run the agent's link over mutual TLS, so that the secure path is the tested one: a CA
// made at start ([NewCA]), node certificates for agents (on a new Ed25519 key, or on the
// agent's own node key) and server certificates for the control plane ([CA.Issue]), in
// memory and written to files with mode 0600 ([Pair.WriteFiles], [NewLink]), and per-site
// intermediates limited to a site's URI domain ([CA.NewIntermediate]).
//
// Certificates live [DefaultLifetime] (24 hours, as the seed's site certificates) unless a
// [Request] says otherwise; short lifetimes and a fake clock (CA.Now) test rotation and
// expiry. Files are written atomically (rename, a new inode), as a rotation by a real
// issuer would replace them.
//
// Nothing here is for production: the CA key lives in memory and every certificate it
// signs is trusted by whoever trusts it.
package sitetlstest
