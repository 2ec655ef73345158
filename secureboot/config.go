package secureboot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/grubcfg"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
)

// render is one machine's configuration being made (or made, waiting for its machine).
type render struct {
	done    chan struct{}
	started time.Time
	status  int
	body    []byte
}

// parseConfigQuery reads the query of a machine's configuration: ipxe.ParseQuery's grammar
// (mac required; uuid, ip, n optional).
func parseConfigQuery(raw string) (ipxe.Query, error) {
	q, err := ipxe.ParseQuery(raw)
	if err != nil {
		return ipxe.Query{}, fmt.Errorf("%w: %w", ErrNotServed, err)
	}
	return q, nil
}

// ConfigURL is the URL of the machine's configuration over this host's TFTP, with the
// query a Chain presents (its MAC, its UUID when set, and its key as n): what a waiting or
// booting configuration asks again.
func (s *Chain) ConfigURL(q ipxe.Query) string {
	u := s.tftpURL(PathConfig) + "?mac=" + q.MAC.String()
	if q.UUID != (hwid.UUID{}) {
		u += "&uuid=" + q.UUID.String()
	}
	return u + "&n=" + q.Nonce
}

// openConfig answers boot/grub.cfg?QUERY over TFTP with the Decider's answer for the
// address the query's key was delivered to. tftpd opens files on its reading loop, so the
// decision is made on a goroutine of its own: when it takes longer than RenderWait (a
// discovery token on its way from the control plane), the machine gets a configuration that
// waits RetryDelay and asks the same name again, which then gets the answer made meanwhile.
//
// Only a request from the address a key was delivered to, presenting that active key for
// its MAC, gets that far; any other is refused here, counted by reason, so that names
// nobody was given start no work.
func (s *Chain) openConfig(name, raw string, from netip.Addr) (fs.File, error) {
	q, err := parseConfigQuery(raw)
	if err != nil {
		// Not a query a Chain sends: give up on the machine so that its firmware moves on,
		// as the decision's own give-ups do (no secret, and nothing reaches the Decider).
		body, err := s.badQuery()
		if err != nil {
			return nil, err
		}
		return memFile(name, body), nil
	}
	q.Remote, q.Loader = from, LoaderName
	if err := s.claim(q); err != nil {
		return nil, err
	}
	// One decision per machine and key, however the query was spelled: the wait
	// configuration asks again by the canonical URL.
	key := s.ConfigURL(q)
	now := s.clock.Now()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	r := s.renders[key]
	if r == nil {
		for k, old := range s.renders {
			if now.Sub(old.started) > RenderKeep {
				delete(s.renders, k)
			}
		}
		if len(s.renders) >= MaxRenders {
			s.mu.Unlock()
			s.n.busy.Add(1)
			return nil, ErrBusy
		}
		r = &render{done: make(chan struct{}), started: now}
		s.renders[key] = r
		s.wg.Add(1)
		go s.render(q, r)
	}
	s.mu.Unlock()
	select {
	case <-r.done:
	default:
		fired := make(chan struct{})
		t := s.clock.AfterFunc(s.cfg.RenderWait, func() { close(fired) })
		select {
		case <-r.done:
			t.Stop()
		case <-fired:
			s.n.configWaits.Add(1)
			body, err := grubcfg.Wait{Delay: s.cfg.RetryDelay, URL: key}.Render()
			if err != nil {
				return nil, err
			}
			return memFile(name, body), nil
		}
	}
	s.mu.Lock()
	if s.renders[key] == r {
		delete(s.renders, key)
	}
	s.mu.Unlock()
	if r.status != http.StatusOK {
		return nil, ErrNotServed
	}
	return memFile(name, r.body), nil
}

// badQuery counts a configuration request whose query does not parse and returns the exit
// configuration it is answered with.
func (s *Chain) badQuery() ([]byte, error) {
	s.n.badQueries.Add(1)
	return grubcfg.Exit{}.Render()
}

// render asks the Decider for q (its key claimed from q.Remote) and spells the answer.
func (s *Chain) render(q ipxe.Query, r *render) {
	defer s.wg.Done()
	defer close(r.done)
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.DecideTimeout)
	defer cancel()
	r.status, r.body = s.decide(ctx, q)
}

// decide asks the Decider for q and spells its answer for GRUB: the status an HTTP client
// gets (over TFTP, 200 sends the body and any other status "file not found") and the body.
// A decision that cannot be spelled is logged and counted, and the machine waits.
func (s *Chain) decide(ctx context.Context, q ipxe.Query) (int, []byte) {
	a := s.cfg.Decider.Decide(ctx, q)
	status, body, err := s.Spell(a, q)
	if err != nil {
		s.n.errors.Add(1)
		s.log.Error("secureboot: cannot spell the decision for GRUB", "mac", q.MAC.String(), "answer", a.Kind.String(),
			"decision", a.Reason, "reason", ReasonOf(err), "err", err)
		body, err = grubcfg.Wait{Delay: s.cfg.RetryDelay, URL: s.ConfigURL(q)}.Render()
		if err != nil {
			return http.StatusInternalServerError, nil
		}
		return http.StatusOK, body
	}
	return status, body
}

// Spell spells one decision for the machine that asked with q, in GRUB's words. GRUB runs a
// configuration only when it got one (TFTP has no status; its http module reads only a
// 200's body), so every answer is a configuration sent as 200: the fenced and waiting
// answers, and "no" (an ipxe.AnswerExit, whatever its Status: unknown, mismatch, unbound,
// a refused address or UUID) the exit configuration, which boots the local disk (the
// ESP's own configuration, else its loader through shim) and exits only without one. The
// fenced configuration does the same after its wait, and so does local boot at once. A "no"
// sent as a missing file would make the Chain's back-off retry first. A boot
// answer's kernel and initrds become TFTP URLs ([TFTPCacheURL]); an answer GRUB cannot
// carry out (an ipxe.AnswerSanboot, or a kind it does not know) is an error wrapping
// ErrUnsupported. Every error is a [*SpellError].
func (s *Chain) Spell(a ipxe.Answer, q ipxe.Query) (status int, body []byte, err error) {
	status, body, err = s.spell(a, q)
	if err != nil {
		return 0, nil, &SpellError{Kind: a.Kind, Err: err}
	}
	return status, body, nil
}

func (s *Chain) spell(a ipxe.Answer, q ipxe.Query) (status int, body []byte, err error) {
	again := s.ConfigURL(q)
	switch a.Kind {
	case ipxe.AnswerBoot:
		kernel, err := TFTPCacheURL(a.Kernel, s.cacheBase(), s.cfg.CacheURLs...)
		if err != nil {
			return 0, nil, err
		}
		initrds := make([]string, len(a.Initrds))
		for i, u := range a.Initrds {
			if initrds[i], err = TFTPCacheURL(u, s.cacheBase(), s.cfg.CacheURLs...); err != nil {
				return 0, nil, err
			}
		}
		// ipxe.Param and grubcfg.Param are one type (the renderers' shared core).
		b, err := grubcfg.Boot{Kernel: kernel, Initrds: initrds, Params: a.Params, Cmdline: a.Cmdline, Again: again}.Render()
		if err != nil {
			return 0, nil, err
		}
		s.n.boots.Add(1)
		return http.StatusOK, b, nil
	case ipxe.AnswerFenced:
		b, err := grubcfg.Fenced{Delay: a.Delay}.Render()
		s.n.fenced.Add(1)
		return http.StatusOK, b, err
	case ipxe.AnswerWait:
		b, err := grubcfg.Wait{Delay: a.Delay, URL: again}.Render()
		s.n.waits.Add(1)
		return http.StatusOK, b, err
	case ipxe.AnswerExit:
		b, err := grubcfg.Exit{}.Render()
		s.n.exits.Add(1)
		return http.StatusOK, b, err
	case ipxe.AnswerLocal:
		b, err := grubcfg.LocalBoot{}.Render()
		return http.StatusOK, b, err
	case ipxe.AnswerSanboot:
		return 0, nil, fmt.Errorf("%w: a sanboot answer (iPXE boots ISOs, GRUB does not)", ErrUnsupported)
	}
	return 0, nil, fmt.Errorf("%w: a %s answer", ErrUnsupported, a.Kind)
}

// TFTPCacheURL turns the URL of an image cache image under a grant, BASE/t/GRANT/SHA256 for
// one of the cache's HTTP base URLs bases (as the Decider's boot answer names the kernel
// and initrds, see ipxe.CacheImage), into the same image over TFTP, TFTPBASE/t/GRANT/SHA256:
// tftpBase is the TFTP URL of the directory the cache's grants are served under
// ("tftp://192.0.2.1/cache" for [Chain.FS] with the default TFTPCacheDir,
// "tftp://192.0.2.1" for bootserver.FS), where the same grant opens the same image
// (Debian's signed GRUB fetches over TFTP only). Any other URL, and a path under t/ that is
// not one GRANT/SHA256 pair of [A-Za-z0-9_-] words, is an error wrapping ErrNotCache: an
// image elsewhere is never fetched by GRUB.
func TFTPCacheURL(u, tftpBase string, bases ...string) (string, error) {
	for _, base := range bases {
		rest, ok := strings.CutPrefix(u, strings.TrimSuffix(base, "/")+"/t/")
		if !ok || base == "" {
			continue
		}
		grant, sha, ok := strings.Cut(rest, "/")
		if !ok || !validWord(grant) || !validWord(sha) {
			return "", fmt.Errorf("%w: not GRANT/SHA256 under %s/t/", ErrNotCache, strings.TrimSuffix(base, "/"))
		}
		return strings.TrimSuffix(tftpBase, "/") + "/t/" + grant + "/" + sha, nil
	}
	return "", ErrNotCache
}

// validWord reports whether s is 1 to 128 of [A-Za-z0-9_-].
func validWord(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// refusalOf returns the bootbind refusal in err's chain, or nil.
func refusalOf(err error) *bootbind.RefusedError {
	var re *bootbind.RefusedError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

func grubcfgReason(err error) string { return grubcfg.ReasonOf(err) }
