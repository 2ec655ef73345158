package ipxe

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/hwid"
)

// Reasons an [Answer] gives for not booting the machine now: the words the handler's
// counters and logs use. A boot answer has none ("").
const (
	ReasonFenced      = "fenced"       // this agent is not the active boot server
	ReasonUnknown     = "unknown"      // no live entry for the MAC
	ReasonMismatch    = "mismatch"     // the host said the machine does not match its entry
	ReasonUnbound     = "unbound"      // the host said the request is not bound to the machine's DHCP answer
	ReasonIPRefused   = "ip-refused"   // the query's IP is not the address the request came from
	ReasonUUIDRefused = "uuid-refused" // the query's UUID is no spelling of the entry's
	ReasonBadQuery    = "bad-query"    // the query did not parse, or names no MAC
	ReasonTokenWait   = "token-wait"   // the discovery token is not available yet
	ReasonSanbootWait = "sanboot-wait" // the ISO is not pinned, cached or granted yet
	ReasonError       = "error"        // a host interface failed or a value was refused (logged)
)

// Decide makes the boot decision for q: what this machine gets now, or why not. It is the
// decision every request for /boot/ipxe and for a [Loader]'s path is answered with, made
// without an HTTP request, so that a host answering over another protocol (a GRUB
// configuration asked over TFTP) takes the same one; it counts and logs as such a request
// does, and calls OnDiscovered for an unknown MAC.
//
// The caller sets q.Remote to the address the request came from (what a boot nonce or key
// is bound to, and the address the assertion states) and q.Loader to the name of the
// loader that will spell the answer ("" for iPXE). A sanboot entry is answered to iPXE
// only. Decide never fails: a host interface's error is logged and answered as a wait
// with status 500 and [ReasonError].
func (h *Handler) Decide(ctx context.Context, q Query) Answer {
	a := h.decide(ctx, q)
	if ev := h.cfg.Events; ev != nil {
		ev.Emit(eventOf(&a, q))
	}
	return a
}

// eventOf is the boot event of answer a to q: the script's (a loader's answer is the
// GRUB stage), answered or refused for a.Reason, with the boot id of q's nonce.
func eventOf(a *Answer, q Query) bootevents.Event {
	e := bootevents.Event{
		MAC: q.MAC, BootID: bootevents.BootIDOf(q.Nonce), Stage: bootevents.StageScript, Outcome: bootevents.OutcomeRefused,
		Reason: a.Reason, Peer: netip.AddrPortFrom(q.Remote, 0), Addr: q.Remote, Arch: q.Arch, HasArch: q.HasArch,
		UUID: q.UUID, HasUUID: q.UUID != hwid.UUID{}, IPXE: q.Loader == "",
	}
	if q.Loader != "" {
		e.Stage, e.Detail = bootevents.StageGRUB, q.Loader
	}
	if a.Kind == AnswerBoot || a.Kind == AnswerSanboot {
		e.Outcome = bootevents.OutcomeOK
	}
	return e
}

func (h *Handler) decide(ctx context.Context, q Query) Answer {
	if q.MAC == (hwid.MAC{}) {
		h.n.badRequests.Add(1)
		return Answer{Kind: AnswerExit, Status: http.StatusBadRequest, Reason: ReasonBadQuery, Query: q}
	}
	log := h.log.With("mac", q.MAC.String(), "remote", q.Remote.String())
	if q.Loader != "" {
		log = log.With("loader", q.Loader)
	}
	exit := func(reason string) Answer {
		return Answer{Kind: AnswerExit, Status: http.StatusNotFound, Reason: reason, Query: q}
	}
	epoch, active := h.cfg.Fence.Active()
	if !active || epoch == 0 {
		h.n.fenced.Add(1)
		log.Info("ipxe: fenced, machine told to wait and then give up")
		return Answer{Kind: AnswerFenced, Status: http.StatusServiceUnavailable, Reason: ReasonFenced, Query: q, Delay: h.cfg.FencedDelay}
	}
	now := clock.Or(h.cfg.Clock).Now()
	e, ok, err := h.cfg.Entries.Entry(ctx, q)
	if errors.Is(err, ErrMismatch) {
		// The MAC has an entry, but this machine is not the one it names: no secret, and
		// not a discovery either (the control plane already knows the MAC).
		h.n.mismatched.Add(1)
		log.Warn("ipxe: machine does not match its boot entry; no script", "reason", err)
		return exit(ReasonMismatch)
	}
	if errors.Is(err, ErrUnbound) {
		// Someone who knows the MAC, not the machine the host answered: no secret.
		h.n.unbound.Add(1)
		log.Warn("ipxe: request not bound to the machine's DHCP answer; no script", "reason", err)
		return exit(ReasonUnbound)
	}
	if err != nil {
		return h.fail(log, "entry lookup", err, q)
	}
	if !ok || (!e.NotAfter.IsZero() && !now.Before(e.NotAfter)) {
		h.n.unknown.Add(1)
		if h.cfg.OnDiscovered != nil {
			h.n.discovered.Add(1)
			h.cfg.OnDiscovered(Discovery{Query: q, At: now})
		}
		return exit(ReasonUnknown)
	}
	e.MAC = q.MAC
	// S2: what the assertion states is what the agent knows, never what the query claims.
	if q.IP.IsValid() && q.IP != q.Remote {
		h.n.ipRefused.Add(1)
		log.Warn("ipxe: query IP is not the connection's address; no script", "ip", q.IP.String())
		return exit(ReasonIPRefused)
	}
	entryUUID := e.UUID
	if entryUUID.IsPlaceholder() {
		entryUUID = hwid.UUID{} // a firmware placeholder names no machine
	}
	if hwid.DifferentMachines(entryUUID, q.UUID) {
		h.n.uuidRefused.Add(1)
		log.Warn("ipxe: query UUID is no spelling of the entry's; no script", "uuid", q.UUID.String())
		return exit(ReasonUUIDRefused)
	}
	if e.LocalBoot {
		h.n.localBoots.Add(1)
		log.Info("ipxe: local boot", "workflow", e.Workflow)
		return Answer{Kind: AnswerLocal, Status: http.StatusOK, Query: q}
	}
	if e.SanbootSHA256 != "" {
		if q.Loader != "" {
			return h.fail(log, "sanboot", invalidErr("sanboot_sha256", "a sanboot entry is served to iPXE only"), q)
		}
		return h.sanboot(ctx, log, e, q)
	}

	token, err := h.token(ctx, e, now)
	if errors.Is(err, ErrNotReady) {
		h.n.tokenWaits.Add(1)
		log.Info("ipxe: discovery token not available yet", "workflow", e.Workflow)
		return Answer{Kind: AnswerWait, Status: http.StatusServiceUnavailable, Reason: ReasonTokenWait, Query: q, Delay: h.cfg.TokenWait}
	}
	if err != nil {
		return h.fail(log, "discovery token", err, q)
	}
	var cache string
	if h.cfg.Cache != nil {
		if cache, err = h.cfg.Cache.CacheURL(ctx, e); err != nil {
			// The ramdisk falls back to the images' source URLs; boot without bc.cache.
			log.Warn("ipxe: no cache URL for this boot", "err", err)
			cache = ""
		}
	}
	// The assertion names the NIC that booted (the query's MAC) and the address the request
	// came from; its UUID is the entry's when it has one (the query's was checked against
	// it above), and its lifetime is the signer's to bound (package assertion).
	claims := Claims{MAC: q.MAC, IP: q.Remote, UUID: entryUUID, Workflow: e.Workflow, Epoch: epoch, NotAfter: e.NotAfter}
	if claims.UUID == (hwid.UUID{}) && !q.UUID.IsPlaceholder() {
		claims.UUID = q.UUID
	}
	assertion, err := h.cfg.Signer.Sign(ctx, claims)
	if err != nil {
		return h.fail(log, "assertion", err, q)
	}
	if ev := h.cfg.Events; ev != nil {
		ev.Emit(bootevents.Event{MAC: q.MAC, BootID: bootevents.BootIDOf(q.Nonce), Stage: bootevents.StageAssertion,
			Outcome: bootevents.OutcomeOK, Peer: netip.AddrPortFrom(q.Remote, 0), Bytes: uint64(len(assertion))})
	}
	a, err := h.bootAnswer(q, token, assertion, cache)
	if err != nil {
		return h.fail(log, "boot answer", err, q)
	}
	h.n.scripts.Add(1)
	log.Info("ipxe: boot answer", "workflow", e.Workflow, "epoch", epoch)
	return a
}

// sanboot decides for an entry that boots an ISO from the cache.
func (h *Handler) sanboot(ctx context.Context, log *slog.Logger, e Entry, q Query) Answer {
	if !isSHA256(e.SanbootSHA256) {
		return h.fail(log, "sanboot digest", invalidErr("sanboot_sha256", "not 64 lower-case hex digits"), q)
	}
	wait := func(why string) Answer {
		h.n.sanbootWaits.Add(1)
		log.Info("ipxe: sanboot ISO not ready, machine waits", "sha256", e.SanbootSHA256, "why", why)
		return Answer{Kind: AnswerWait, Status: http.StatusServiceUnavailable, Reason: ReasonSanbootWait, Query: q, Delay: h.cfg.SanbootWait}
	}
	if h.cfg.Cache == nil {
		return wait("no cache configured")
	}
	ready, err := h.cfg.Cache.ISOReady(ctx, e.SanbootSHA256)
	if err != nil {
		return h.fail(log, "sanboot readiness", err, q)
	}
	if !ready {
		return wait("not pinned as an iso image or not cached")
	}
	u, err := h.cfg.Cache.SanbootURL(ctx, e)
	if errors.Is(err, ErrNotReady) {
		return wait("no grant yet")
	}
	if err != nil {
		return h.fail(log, "sanboot grant", err, q)
	}
	if _, err := (Sanboot{URL: u}).Render(); err != nil {
		return h.fail(log, "sanboot script", err, q) // a URL the script cannot carry
	}
	h.n.sanboots.Add(1)
	log.Info("ipxe: sanboot script", "workflow", e.Workflow, "sha256", e.SanbootSHA256)
	return Answer{Kind: AnswerSanboot, Status: http.StatusOK, Query: q, URL: u}
}

// fail logs a host interface's error and answers a wait: the machine retries (iPXE honours
// Retry-After) rather than falling through.
func (h *Handler) fail(log *slog.Logger, what string, err error, q Query) Answer {
	h.n.errors.Add(1)
	log.Error("ipxe: cannot answer a script", "step", what, "err", err)
	return Answer{Kind: AnswerWait, Status: http.StatusInternalServerError, Reason: ReasonError, Query: q, Delay: h.cfg.TokenWait}
}
