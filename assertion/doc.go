// Package assertion implements signed discovery assertions: a site agent's signed statement
// that it served a machine's network boot, which the control plane checks before it lets the
// machine's ramdisk join (DESIGN.md A1-A2).
//
// The agent holding a site's boot lease puts a fresh assertion on the kernel command line of
// every ramdisk it boots: "I, agent N of site S, holding the boot lease at epoch E, served MAC
// M at IP I (UUID U) for workflow W at time T; valid until T2". The ramdisk presents it with
// its discovery token; the control plane admits the join only when the assertion is valid,
// fresh and unused, and its signer was the site's active boot server when it signed.
//
// # Wiring
//
// Agent side: an [Issuer] with the agent's site, node id and node key (any crypto.Signer:
// an ed25519.PrivateKey, or a key in an HSM or TPM). The boot handler calls [Issuer.Issue]
// with the lease epoch its fence reports and the boot entry's fields, and puts the returned
// text on the kernel command line. Its optional Events field (a bootevents.Sink, such as
// the host's bootevents.Timeline) receives one assertion event per Issue: signed, with the
// time signing took, or refused with the word for why (no epoch, a lapsed entry, ...);
// with no Events nothing is built.
//
// Control-plane side: a [Verifier] with three small interfaces the host implements: a
// [KeyResolver] (the agent's public key, site and role by node id), a [LeaseChecker] (is the
// agent the holder of the site's boot lease at this epoch), and a [ReplayCache]
// ([MemoryReplayCache] for a single process). [Verifier.Verify] returns the assertion or a
// *[RefusedError] whose [Reason] the caller switches on.
//
// The lease package's Checker answers the lease check; a host maps its refusals onto this
// package's, so that they get their own reasons rather than ReasonUnavailable:
//
//	checker := &lease.Checker{Store: store}
//	v.Leases = assertion.LeaseCheckerFunc(func(ctx context.Context, site, agent string, epoch uint64) error {
//		err := checker.CheckEpoch(ctx, site, agent, epoch)
//		switch {
//		case errors.Is(err, lease.ErrStaleEpoch):
//			return fmt.Errorf("%w: %w", assertion.ErrStaleEpoch, err)
//		case errors.Is(err, lease.ErrNotHolder), errors.Is(err, lease.ErrLapsed):
//			return fmt.Errorf("%w: %w", assertion.ErrNotLeaseHolder, err)
//		}
//		return err // nil, or the store's error
//	})
//
// A test of code that issues or takes assertions gets a ready Issuer and a Verifier that
// trusts it from [github.com/bettercompute/siteboot/assertion/assertiontest].
//
// On the agent side, the ipxe package's Signer is one call:
//
//	ipxe.SignerFunc(func(ctx context.Context, c ipxe.Claims) (string, error) {
//		return issuer.Issue(ctx, assertion.Fields{Epoch: c.Epoch, MAC: c.MAC, IP: c.IP,
//			UUID: c.UUID, Workflow: c.Workflow, NotAfter: c.NotAfter})
//	})
//
// # Encoding
//
// An assertion is encoded as these fields, in this order, with no padding between them
// (integers big-endian; "id" is a length byte then 0 to 56 bytes of [A-Za-z0-9._:-]; the
// site and agent ids are never empty):
//
//	version    1 byte, 0x01
//	site       id
//	agent      id (the agent's node id)
//	epoch      8 bytes, unsigned
//	mac        6 bytes
//	ip         1 length byte (0, 4 or 16), then that many bytes
//	uuid       1 presence byte (0 or 1), then 16 bytes (never all zero) when 1
//	workflow   id (may be empty)
//	issued-at  8 bytes, signed Unix seconds
//	not-after  8 bytes, signed Unix seconds
//
// The signature covers the ASCII bytes "siteboot/discovery-assertion", a zero byte, then the
// encoded assertion. With Ed25519 it is over that message; with ECDSA it is ASN.1 over its
// SHA-256 (P-256) or SHA-384 (P-384) digest. The text form is base64url without padding of
// the encoded assertion followed directly by the signature (the encoding says where the
// assertion ends). Only the canonical form decodes, so one assertion has one text.
//
// A typical assertion (ULID-style ids of about 30 bytes, IPv4, a UUID, Ed25519) is 282
// characters; with an Ed25519
// key no assertion exceeds 400 ([MaxEd25519TextLen]). testdata/vectors.json holds test
// vectors for other implementations: key seed, fields, exact bytes and text.
//
// # Security
//
// The purpose string separates these signatures from anything else the node key signs: a
// signature made for any other purpose never verifies here. The replay id hashes the encoded
// assertion only, so a second valid signature over the same bytes is still a replay. Only an
// assertion that passed every other check is recorded as used, so a stolen assertion
// presented with the wrong MAC does not burn the real machine's. Every assertion lives at
// most 15 minutes (plus the skew allowance), which bounds what the replay cache must hold.
//
// The purpose is followed by a zero byte, which no purpose string contains, so no two
// purposes' messages can collide.
//
// The lease check is as good as the LeaseChecker's read: an epoch that is not the current
// one, or a holder that is not the signer, is refused, so after a failover the old holder's
// assertions stop verifying even within their 15 minutes.
//
// # Limits
//
// Ids are at most 56 bytes of [A-Za-z0-9._:-]. Texts are at most 400 characters with Ed25519,
// 411 with ECDSA P-256 and [MaxTextLen] (454) with P-384; RSA keys are not supported (their
// signatures would not fit a kernel command line). [MemoryReplayCache] holds up to 2^20
// entries by default, 24 to 48 bytes each (44.6 measured at 1e6), and refuses new ones (as
// ReasonUnavailable) rather than forget a live one.
package assertion
