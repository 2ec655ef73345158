package ipxe

import (
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/hwid"
)

// Paths the handler serves.
const (
	PathChain = "/boot/chain.ipxe"
	PathBoot  = "/boot/ipxe"
	PathFiles = "/boot/files/"
)

// Boot parameters the handler adds after [Config.Params].
const (
	ParamToken     = "bc.token"
	ParamAssertion = "bc.assertion"
	ParamCache     = "bc.cache"
)

// Handler defaults.
const (
	// DefaultTokenWait is how long a machine waits for its discovery token before asking
	// again.
	DefaultTokenWait = 5 * time.Second
	// DefaultSanbootWait is how long a machine waits for its ISO before asking again.
	DefaultSanbootWait = 30 * time.Second
	// DefaultEntryLifetime is how long a token is kept for an entry without a not-after.
	DefaultEntryLifetime = 6 * time.Hour
	// DefaultMaxTokens bounds the tokens the handler keeps.
	DefaultMaxTokens = 4096
)

// Config configures a [Handler]. Entries, Fence, Tokens, Signer and Kernel are required;
// every other zero field means its default.
type Config struct {
	Entries Entries // the machines' live boot entries
	Fence   Fence   // whether this agent is the active boot server
	Tokens  Tokens  // discovery tokens
	Signer  Signer  // signs discovery assertions
	// Cache gives bc.cache and sanboot grant URLs. Nil means no bc.cache, and sanboot
	// entries wait forever (never the ramdisk).
	Cache Cache
	// OnDiscovered is called, synchronously, for each GET from a MAC without a live entry,
	// while this agent is active. Anyone can fetch a URL: the host decides what counts (the
	// reference agent's discovery list keeps only MACs proxy DHCP already showed). Nil: none.
	OnDiscovered func(Discovery)
	// Files holds the iPXE builds served under /boot/files/ (one level, no dot files). Use
	// (*os.Root).FS or an embed.FS: nothing outside it is reachable. Nil: 404.
	Files fs.FS

	// The site's ramdisk.
	Kernel  string   // kernel URL, or CacheImage(sha256) to serve it under the boot grant
	Initrds []string // initrd URLs, or CacheImage(sha256) each
	Params  []Param  // boot parameters before the token (gateway, pins, join key), "bc.*"
	Cmdline string   // the site's command line, space-separated, after every boot parameter

	// BaseURL, when set (e.g. "http://192.0.2.1:8080"), makes the URLs in scripts
	// absolute; empty keeps them relative to the script's own URL, which iPXE resolves.
	BaseURL   string
	Interface string // iPXE device the chain script reads; "" means DefaultInterface (netX)
	VLAN      int    // VLAN tag the chain script creates on Interface; 0 none
	Retry     Retry  // back-off of every fetch in a script

	// Syslog, when valid, is the IPv4 address of the host's syslog receiver on UDP 514:
	// the chain script sets iPXE's ${syslog} to it, so that an iPXE with the syslog
	// console sends its console lines there (see Chain.Syslog). The zero Addr: none.
	Syslog netip.Addr

	// Loaders are boot loaders other than iPXE answered with the same decision on paths of
	// their own (GRUB on a Secure Boot machine); nil: none.
	Loaders []Loader

	TokenWait   time.Duration // 0 means DefaultTokenWait
	SanbootWait time.Duration // 0 means DefaultSanbootWait
	FencedDelay time.Duration // 0 means DefaultFencedDelay
	MaxTokens   int           // 0 means DefaultMaxTokens

	Clock  clock.Clock  // the clock entries' ends are compared with; nil means [clock.Real]
	Logger *slog.Logger // nil discards

	// Events, if set, receives a boot event per decision (Decide: the script, or the GRUB
	// stage for a Loader's path, answered or refused for the Answer's Reason) and one per
	// assertion signed, with the boot id of the request's nonce. Nil builds none.
	Events bootevents.Sink
}

// Validate checks the configuration: the host interfaces are set and the site's ramdisk
// renders (every URL, parameter and command-line token is safe).
func (c Config) Validate() error {
	switch {
	case c.Entries == nil:
		return fmt.Errorf("%w: Entries is nil", ErrInvalid)
	case c.Fence == nil:
		return fmt.Errorf("%w: Fence is nil", ErrInvalid)
	case c.Tokens == nil:
		return fmt.Errorf("%w: Tokens is nil", ErrInvalid)
	case c.Signer == nil:
		return fmt.Errorf("%w: Signer is nil", ErrInvalid)
	case c.MaxTokens < 0:
		return fmt.Errorf("%w: MaxTokens is negative", ErrInvalid)
	}
	if c.BaseURL != "" {
		u, err := checkURL("base_url", c.BaseURL, false)
		if err != nil {
			return err
		}
		if u.Scheme == "tftp" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" ||
			strings.ContainsAny(c.BaseURL, "?#") {
			return invalidErr("base_url", "must be http(s)://HOST[:PORT]")
		}
	}
	for i, p := range c.Params {
		if err := checkName(fmt.Sprintf("params[%d]", i), p.Name); err != nil {
			return err
		}
		if !strings.HasPrefix(p.Name, ReservedPrefix) {
			return invalidErr("params["+p.Name+"]", "boot parameters are named "+ReservedPrefix+"*")
		}
		if p.Name == ParamToken || p.Name == ParamAssertion || p.Name == ParamCache {
			return invalidErr("params["+p.Name+"]", "set by the handler")
		}
	}
	h := &Handler{cfg: c}
	h.setDefaults()
	// A dry run with the longest values the handler adds shows the site's part is safe.
	nonce := strings.Repeat("n", MaxNonceLen)
	if _, err := h.bootScript("TOKEN", strings.Repeat("A", 300), "http://192.0.2.1/cache/t/x/", h.again(nonce)); err != nil {
		return err
	}
	for _, s := range []interface{ Render() ([]byte, error) }{
		h.chainScript(""), h.chainScript(nonce), Fenced{Delay: h.cfg.FencedDelay},
		Wait{Delay: h.cfg.TokenWait, URL: h.again(nonce)}, Wait{Delay: h.cfg.SanbootWait, URL: h.again(nonce)},
	} {
		if _, err := s.Render(); err != nil {
			return err
		}
	}
	return h.validateLoaders()
}

// Handler is the boot HTTP handler: GET/HEAD /boot/chain.ipxe, /boot/ipxe and
// /boot/files/NAME. It is safe for concurrent use. Create it with [NewHandler].
type Handler struct {
	cfg     Config
	log     *slog.Logger
	cmdline []string
	chain   []byte
	n       counters

	mu     sync.Mutex
	tokens map[hwid.MAC]cachedToken
	sf     singleflight.Group
}

// NewHandler validates c and returns the handler.
func NewHandler(c Config) (*Handler, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{cfg: c, tokens: make(map[hwid.MAC]cachedToken)}
	h.setDefaults()
	chain, err := h.chainScript("").Render()
	if err != nil {
		return nil, err
	}
	h.chain = chain
	return h, nil
}

func (h *Handler) setDefaults() {
	c := &h.cfg
	h.log = c.Logger
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if c.TokenWait == 0 {
		c.TokenWait = DefaultTokenWait
	}
	if c.SanbootWait == 0 {
		c.SanbootWait = DefaultSanbootWait
	}
	if c.FencedDelay == 0 {
		c.FencedDelay = DefaultFencedDelay
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	c.BaseURL = strings.TrimSuffix(c.BaseURL, "/")
	h.cmdline = strings.Fields(c.Cmdline)
}

func (h *Handler) url(path string) string { return h.cfg.BaseURL + path }

func (h *Handler) chainScript(nonce string) Chain {
	return Chain{URL: h.url(PathBoot), Interface: h.cfg.Interface, VLAN: h.cfg.VLAN, Retry: h.cfg.Retry, Nonce: nonce, Syslog: h.cfg.Syslog}
}

// again is the URL a script chains to for a fresh answer: the chain script, with the boot
// nonce the machine came with, so its retries and waits stay bound to its DHCP answer.
func (h *Handler) again(nonce string) string {
	if nonce == "" {
		return h.url(PathChain)
	}
	return h.url(PathChain) + "?" + ParamNonce + "=" + nonce
}

// bootScript is the iPXE script of bootAnswer, as the handler's dry run renders it.
func (h *Handler) bootScript(token, assertion, cache, again string) ([]byte, error) {
	a, err := h.bootAnswer(Query{}, token, assertion, cache)
	if err != nil {
		return nil, err
	}
	return Boot{Kernel: a.Kernel, Initrds: a.Initrds, Params: a.Params, Cmdline: a.Cmdline, Retry: h.cfg.Retry, Again: again}.Render()
}

// ServeHTTP answers the boot paths; anything else is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.n.requests.Add(1)
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.n.errors.Add(1)
			h.log.Error("ipxe: handler panic", "panic", fmt.Sprint(v), "path", r.URL.Path)
			plain(w, http.StatusInternalServerError, "internal error\n")
		}
	}()
	if headerBytes(r, MaxHeaderBytes) > MaxHeaderBytes {
		h.n.headersTooLarge.Add(1)
		plain(w, http.StatusRequestHeaderFieldsTooLarge, "request header fields too large\n")
		return
	}
	// /boot/ipxe is GET only: a HEAD would have to sign an assertion and fetch a token to
	// say how long the script is (S2), and no firmware sends one there.
	ld := h.loaderFor(r.URL.Path)
	if allow := allowed(r.URL.Path, ld); r.Method != http.MethodGet && (r.Method != http.MethodHead || allow == "GET") {
		h.n.methodsRefused.Add(1)
		w.Header().Set("Allow", allow)
		plain(w, http.StatusMethodNotAllowed, "method not allowed\n")
		return
	}
	switch p := r.URL.Path; {
	case p == PathChain:
		h.serveChain(w, r)
	case p == PathBoot:
		h.serveBoot(w, r, nil)
	case ld != nil:
		h.serveBoot(w, r, ld)
	case strings.HasPrefix(p, PathFiles):
		h.serveFile(w, r, strings.TrimPrefix(p, PathFiles))
	default:
		h.n.notFound.Add(1)
		plain(w, http.StatusNotFound, "not found\n")
	}
}

// allowed is the Allow header of a path: GET only for the machine's script, in iPXE's
// language or a loader's.
func allowed(path string, ld *Loader) string {
	if path == PathBoot || ld != nil {
		return "GET"
	}
	return "GET, HEAD"
}

// serveChain answers the chain script, with the boot nonce of the chain URL carried on.
func (h *Handler) serveChain(w http.ResponseWriter, r *http.Request) {
	nonce, err := parseChainQuery(r.URL.RawQuery)
	if err != nil {
		h.n.badRequests.Add(1)
		h.log.Debug("ipxe: chain query refused", "err", err, "remote", r.RemoteAddr)
		h.script(w, http.StatusOK, Exit{}, 0) // iPXE runs only a 2xx body: see scriptStatus
		return
	}
	h.n.chains.Add(1)
	if nonce == "" {
		writeScript(w, http.StatusOK, h.chain, 0)
		return
	}
	h.script(w, http.StatusOK, h.chainScript(nonce), 0)
}

// serveBoot answers the machine's script (/boot/ipxe), or with ld its answer in that
// loader's language: the query is parsed here, the decision is [Handler.Decide]'s.
func (h *Handler) serveBoot(w http.ResponseWriter, r *http.Request, ld *Loader) {
	q, err := ParseQuery(r.URL.RawQuery)
	if err != nil {
		h.n.badRequests.Add(1)
		h.log.Debug("ipxe: query refused", "err", err, "remote", r.RemoteAddr)
		q = Query{}
	}
	q.Remote = remoteAddr(r)
	q.Loader = loaderName(ld)
	var a Answer
	if err != nil {
		a = Answer{Kind: AnswerExit, Status: http.StatusBadRequest, Reason: ReasonBadQuery, Query: q}
	} else {
		a = h.Decide(r.Context(), q)
	}
	h.spell(w, ld, a)
}

// spell writes a in iPXE's language, or in ld's when it is not nil.
func (h *Handler) spell(w http.ResponseWriter, ld *Loader, a Answer) {
	var retryAfter time.Duration
	if a.Kind == AnswerWait {
		retryAfter = a.Delay // iPXE honours Retry-After: a waiting machine keeps waiting
	}
	if ld != nil {
		h.answer(w, ld, a, nil, retryAfter)
		return
	}
	again := h.again(a.Query.Nonce)
	var s interface{ Render() ([]byte, error) }
	switch a.Kind {
	case AnswerBoot:
		s = Boot{Kernel: a.Kernel, Initrds: a.Initrds, Params: a.Params, Cmdline: a.Cmdline, Retry: h.cfg.Retry, Again: again}
	case AnswerSanboot:
		s = Sanboot{URL: a.URL, Retry: h.cfg.Retry, Again: again}
	case AnswerLocal:
		s = LocalBoot{}
	case AnswerFenced:
		s = Fenced{Delay: a.Delay}
	case AnswerWait:
		s = Wait{Delay: a.Delay, URL: again}
	default:
		s = Exit{}
	}
	h.script(w, scriptStatus(a), s, retryAfter)
}

// scriptStatus is the HTTP status an answer in iPXE's language goes with: a.Status, except
// that the exit script goes with 200. iPXE runs only the body of a 2xx answer; after a 4xx
// its chain command fails, and the chain script retries with back-off before it gives up,
// so the firmware would reach its next boot entry only after that wait. The exit script says
// "exit 1": a plain exit returns success, and UEFI then opens its Boot Manager instead of
// booting the next Boot#### entry (tinkerbell/tinkerbell #984).
func scriptStatus(a Answer) int {
	if a.Kind == AnswerExit {
		return http.StatusOK
	}
	return a.Status
}

func loaderName(ld *Loader) string {
	if ld == nil {
		return ""
	}
	return ld.Name
}

// script renders s and writes it; the scripts given here render for any validated config.
func (h *Handler) script(w http.ResponseWriter, status int, s interface{ Render() ([]byte, error) }, retryAfter time.Duration) {
	body, err := s.Render()
	if err != nil {
		h.n.errors.Add(1)
		h.log.Error("ipxe: cannot render a script", "err", err)
		plain(w, http.StatusInternalServerError, "internal error\n")
		return
	}
	writeScript(w, status, body, retryAfter)
}

// writeScript answers an iPXE script. iPXE runs only the body of a 2xx answer; with a
// Retry-After header it asks the same URL again after that many seconds, which is how a
// waiting machine keeps waiting.
func writeScript(w http.ResponseWriter, status int, body []byte, retryAfter time.Duration) {
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=us-ascii")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter > 0 {
		hd.Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func plain(w http.ResponseWriter, status int, msg string) {
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Length", strconv.Itoa(len(msg)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

func remoteAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err == nil {
		return ap.Addr().Unmap()
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}
