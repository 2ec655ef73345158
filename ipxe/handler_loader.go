package ipxe

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Loader is a boot loader other than iPXE that the handler answers on a path of its own with
// the same decision as /boot/ipxe (the fence, the live entry and the host's Entries rule,
// the query's IP and UUID checks, the token, the cache grant and a fresh assertion), each
// answer spelled in the loader's language by the host: GRUB, on a machine that boots with
// UEFI Secure Boot through shim, say. The handler renders no loader's language itself, so
// that it keeps no knowledge of another package's grammar.
type Loader struct {
	// Name is set as [Query.Loader] on the requests to Path, so that the host's Entries can
	// bind them by a rule of its own: 1 to 16 of [a-z0-9-].
	Name string
	// Path is the path the loader asks (e.g. "/boot/grub.cfg"), GET only: under /boot/, and
	// neither one of the handler's own paths nor under PathFiles.
	Path string
	// Render spells one answer. It returns the status to send with the body: a loader that
	// runs only the body of a 200 (GRUB's http module), or one that reads the answer where no
	// status travels (a TFTP file), answers the fenced and waiting answers with 200, and
	// says no to a machine with [Answer.Status]. An error makes the handler answer 500 and
	// log it; the handler's dry run ([Config.Validate]) renders every kind once.
	Render func(Answer) (status int, body []byte, err error)
}

// AnswerKind says what an [Answer] tells the machine.
type AnswerKind uint8

// Kinds of answer.
const (
	// AnswerBoot: boot the ramdisk, with Kernel, Initrds, Params and Cmdline (status 200).
	AnswerBoot AnswerKind = iota + 1
	// AnswerExit: nothing for this machine (status 404, or 400 for a query that does not
	// parse); what /boot/ipxe answers with the exit script, as a 200 (iPXE runs only a 2xx
	// body).
	AnswerExit
	// AnswerFenced: this agent is not the active boot server (status 503); wait Delay (a
	// failover within it is still reached by a loader that asks again meanwhile) and then
	// give up as AnswerExit does, so that the firmware boots something other than this
	// network boot.
	AnswerFenced
	// AnswerWait: not ready (the discovery token, status 503) or a host interface failed
	// (status 500); wait Delay and ask again.
	AnswerWait
	// AnswerSanboot: boot the ISO at URL (a cache grant URL), iPXE only (status 200).
	AnswerSanboot
	// AnswerLocal: the entry says boot from the local disk, now (status 200): iPXE on BIOS
	// boots drive 0x80, iPXE on UEFI exits with failure, so that the firmware boots its next
	// boot entry, and GRUB boots the disk's ESP itself (its exit returns success under
	// Debian's shim). A site that keeps the network first in the boot order keeps control
	// without making the firmware wait out DHCP timeouts.
	AnswerLocal
)

func (k AnswerKind) String() string {
	switch k {
	case AnswerBoot:
		return "boot"
	case AnswerExit:
		return "exit"
	case AnswerFenced:
		return "fenced"
	case AnswerWait:
		return "wait"
	case AnswerSanboot:
		return "sanboot"
	case AnswerLocal:
		return "local"
	}
	return fmt.Sprintf("answer(%d)", uint8(k))
}

// Answer is one answer of the handler's decision ([Handler.Decide]), for iPXE or a [Loader]
// to spell.
type Answer struct {
	Kind AnswerKind
	// Status is the decision's HTTP status, what a Loader answers with: /boot/ipxe answers
	// iPXE with it too, except 200 for AnswerExit (iPXE runs only a 2xx body).
	Status int
	// Reason says why the machine does not boot now, one of the Reason* words; "" for
	// AnswerBoot and AnswerSanboot.
	Reason string
	// Query is the request's query, with Remote and Loader set; zero fields for a query
	// that did not parse. A loader builds the URL it asks again from it.
	Query Query

	// AnswerBoot: the site's kernel and initrds as URLs (a cache image under the machine's
	// boot grant), the boot parameters in order (the host's, then bc.token, bc.assertion and
	// bc.cache), and the site's command line, one token each. The values passed the same
	// checks as in an iPXE script.
	Kernel  string
	Initrds []string
	Params  []Param
	Cmdline []string

	// AnswerSanboot: the ISO's URL under the machine's grant.
	URL string

	// AnswerFenced and AnswerWait: how long the machine waits.
	Delay time.Duration
}

// validLoaderName reports whether s is 1 to 16 of [a-z0-9-].
func validLoaderName(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validateLoaders checks the loaders' names and paths, and renders each kind of answer once
// with the longest values the handler adds, so that a site whose parameters the loader
// cannot express fails at start, not at a machine's boot.
func (h *Handler) validateLoaders() error {
	names, paths := map[string]bool{}, map[string]bool{}
	for i, l := range h.cfg.Loaders {
		field := fmt.Sprintf("loaders[%d]", i)
		switch {
		case !validLoaderName(l.Name):
			return invalidErr(field, "a loader's name is 1 to 16 of [a-z0-9-]")
		case names[l.Name]:
			return invalidErr(field, "loader named twice")
		case !strings.HasPrefix(l.Path, "/boot/") || l.Path == PathChain || l.Path == PathBoot ||
			strings.HasPrefix(l.Path, PathFiles) || strings.ContainsAny(l.Path, "?#% ") || paths[l.Path]:
			return invalidErr(field, "a loader's path is its own, under /boot/ and not under "+PathFiles)
		case l.Render == nil:
			return invalidErr(field, "Render is nil")
		}
		names[l.Name], paths[l.Path] = true, true
		q := Query{Nonce: strings.Repeat("n", MaxNonceLen), Loader: l.Name}
		base := h.cfg.BaseURL
		if base == "" {
			base = "http://192.0.2.1"
		}
		cache := base + "/cache/t/" + strings.Repeat("g", 32) + "/"
		boot, err := h.bootAnswer(q, "TOKEN", strings.Repeat("A", 300), cache)
		if err != nil {
			return err
		}
		for _, a := range []Answer{
			boot,
			{Kind: AnswerExit, Status: http.StatusNotFound, Query: q},
			{Kind: AnswerLocal, Status: http.StatusOK, Query: q},
			{Kind: AnswerFenced, Status: http.StatusServiceUnavailable, Query: q, Delay: h.cfg.FencedDelay},
			{Kind: AnswerWait, Status: http.StatusServiceUnavailable, Query: q, Delay: h.cfg.TokenWait},
		} {
			if _, _, err := l.Render(a); err != nil {
				return fmt.Errorf("ipxe: loader %s cannot render the %s answer: %w", l.Name, a.Kind, err)
			}
		}
	}
	return nil
}

// loaderFor returns the loader whose path this is, or nil.
func (h *Handler) loaderFor(path string) *Loader {
	for i := range h.cfg.Loaders {
		if h.cfg.Loaders[i].Path == path {
			return &h.cfg.Loaders[i]
		}
	}
	return nil
}

// bootAnswer is the ramdisk answer: what bootScript renders for iPXE.
func (h *Handler) bootAnswer(q Query, token, assertion, cache string) (Answer, error) {
	params := make([]Param, 0, len(h.cfg.Params)+3)
	params = append(params, h.cfg.Params...)
	params = append(params, Param{Name: ParamToken, Value: token}, Param{Name: ParamAssertion, Value: assertion})
	if cache != "" {
		if _, err := checkURL(ParamCache, cache, false); err != nil {
			return Answer{}, err
		}
		params = append(params, Param{Name: ParamCache, Value: cache})
	}
	for _, p := range params {
		if err := checkWord("params["+p.Name+"]", p.Value); err != nil {
			return Answer{}, err
		}
	}
	kernel, err := resolveImage("kernel", h.cfg.Kernel, cache)
	if err != nil {
		return Answer{}, err
	}
	initrds := make([]string, len(h.cfg.Initrds))
	for i, v := range h.cfg.Initrds {
		if initrds[i], err = resolveImage("initrds", v, cache); err != nil {
			return Answer{}, err
		}
	}
	return Answer{
		Kind: AnswerBoot, Status: http.StatusOK, Query: q,
		Kernel: kernel, Initrds: initrds, Params: params, Cmdline: h.cmdline,
	}, nil
}

// answer writes a for the loader ld, or s (the iPXE script for the same decision) when ld
// is nil.
func (h *Handler) answer(w http.ResponseWriter, ld *Loader, a Answer, s interface{ Render() ([]byte, error) }, retryAfter time.Duration) {
	if ld == nil {
		h.script(w, a.Status, s, retryAfter)
		return
	}
	status, body, err := ld.Render(a)
	if err != nil {
		h.n.errors.Add(1)
		h.log.Error("ipxe: loader cannot render its answer", "loader", ld.Name, "answer", a.Kind.String(), "err", err)
		plain(w, http.StatusInternalServerError, "internal error\n")
		return
	}
	if status != http.StatusServiceUnavailable && status != http.StatusInternalServerError {
		retryAfter = 0
	}
	writeScript(w, status, body, retryAfter)
}
