package ipxe

import (
	"context"
	"errors"
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
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

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
	// MaxHeaderBytes caps a request's header: the request line and every header field
	// counted as "Name: value\r\n".
	MaxHeaderBytes = 8 << 10
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
	// DHCPSeen reports whether proxy DHCP saw this MAC. When set, a fetch from an unknown
	// MAC is reported only if DHCP saw it (anyone can fetch a URL); nil means proxy DHCP
	// does not run here and every such fetch is reported.
	DHCPSeen func(mac hwid.MAC) bool
	// OnDiscovered is called, synchronously, for each reported unknown machine. Nil: none.
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
	Interface string // iPXE device the chain script reads; "" means DefaultInterface
	VLAN      int    // VLAN tag the chain script creates on Interface; 0 none
	Retry     Retry  // back-off of every fetch in a script

	TokenWait   time.Duration // 0 means DefaultTokenWait
	SanbootWait time.Duration // 0 means DefaultSanbootWait
	FencedDelay time.Duration // 0 means DefaultFencedDelay
	MaxTokens   int           // 0 means DefaultMaxTokens

	Now    func() time.Time // nil means time.Now
	Logger *slog.Logger     // nil discards
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
	if _, err := h.bootScript("TOKEN", strings.Repeat("A", 300), "http://192.0.2.1/cache/t/x/"); err != nil {
		return err
	}
	for _, s := range []interface{ Render() ([]byte, error) }{
		h.chainScript(), Fenced{Delay: h.cfg.FencedDelay},
		Wait{Delay: h.cfg.TokenWait, URL: h.url(PathChain)}, Wait{Delay: h.cfg.SanbootWait, URL: h.url(PathChain)},
	} {
		if _, err := s.Render(); err != nil {
			return err
		}
	}
	return nil
}

// Counters are the handler's running totals.
type Counters struct {
	Requests        uint64 // every request
	Chains          uint64 // chain.ipxe answered
	Scripts         uint64 // ramdisk boot scripts answered (200)
	Sanboots        uint64 // sanboot scripts answered (200)
	Unknown         uint64 // 404: no live entry
	Discovered      uint64 // unknown machines reported to OnDiscovered
	Fenced          uint64 // 503: this agent is not the active boot server
	TokenWaits      uint64 // 503: the discovery token is not available yet
	SanbootWaits    uint64 // 503: the ISO is not pinned and cached yet
	TokenFetches    uint64 // times the host's Tokens was asked
	BadRequests     uint64 // 400: query refused
	HeadersTooLarge uint64 // 431
	MethodsRefused  uint64 // 405
	NotFound        uint64 // 404 for a path or file
	Files           uint64 // files answered
	Errors          uint64 // 500: a host interface failed or a value was refused
}

type counters struct {
	requests, chains, scripts, sanboots, unknown, discovered, fenced, tokenWaits,
	sanbootWaits, tokenFetches, badRequests, headersTooLarge, methodsRefused, notFound,
	files, errors atomic.Uint64
}

// Handler is the boot HTTP handler: GET/HEAD /boot/chain.ipxe, /boot/ipxe and
// /boot/files/NAME. It is safe for concurrent use. Create it with [NewHandler].
type Handler struct {
	cfg     Config
	log     *slog.Logger
	cmdline []string
	chain   []byte
	c       counters

	mu     sync.Mutex
	tokens map[hwid.MAC]cachedToken
	sf     singleflight.Group
}

type cachedToken struct {
	workflow string
	notAfter time.Time
	token    string
	expires  time.Time
}

// NewHandler validates c and returns the handler.
func NewHandler(c Config) (*Handler, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{cfg: c, tokens: make(map[hwid.MAC]cachedToken)}
	h.setDefaults()
	chain, err := h.chainScript().Render()
	if err != nil {
		return nil, err
	}
	h.chain = chain
	return h, nil
}

func (h *Handler) setDefaults() {
	c := &h.cfg
	if c.Now == nil {
		c.Now = time.Now
	}
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

func (h *Handler) chainScript() Chain {
	return Chain{URL: h.url(PathBoot), Interface: h.cfg.Interface, VLAN: h.cfg.VLAN, Retry: h.cfg.Retry}
}

func (h *Handler) bootScript(token, assertion, cache string) ([]byte, error) {
	params := make([]Param, 0, len(h.cfg.Params)+3)
	params = append(params, h.cfg.Params...)
	params = append(params, Param{ParamToken, token}, Param{ParamAssertion, assertion})
	if cache != "" {
		if _, err := checkURL(ParamCache, cache, false); err != nil {
			return nil, err
		}
		params = append(params, Param{ParamCache, cache})
	}
	kernel, err := resolveImage("kernel", h.cfg.Kernel, cache)
	if err != nil {
		return nil, err
	}
	initrds := make([]string, len(h.cfg.Initrds))
	for i, v := range h.cfg.Initrds {
		if initrds[i], err = resolveImage("initrds", v, cache); err != nil {
			return nil, err
		}
	}
	return Boot{
		Kernel: kernel, Initrds: initrds, Params: params, Cmdline: h.cmdline,
		Retry: h.cfg.Retry, Again: h.url(PathChain),
	}.Render()
}

// Counters returns a snapshot of the running totals.
func (h *Handler) Counters() Counters {
	c := &h.c
	return Counters{
		Requests: c.requests.Load(), Chains: c.chains.Load(), Scripts: c.scripts.Load(),
		Sanboots: c.sanboots.Load(), Unknown: c.unknown.Load(), Discovered: c.discovered.Load(),
		Fenced: c.fenced.Load(), TokenWaits: c.tokenWaits.Load(), SanbootWaits: c.sanbootWaits.Load(),
		TokenFetches: c.tokenFetches.Load(), BadRequests: c.badRequests.Load(),
		HeadersTooLarge: c.headersTooLarge.Load(), MethodsRefused: c.methodsRefused.Load(),
		NotFound: c.notFound.Load(), Files: c.files.Load(), Errors: c.errors.Load(),
	}
}

// ServeHTTP answers the boot paths; anything else is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.c.requests.Add(1)
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.c.errors.Add(1)
			h.log.Error("ipxe: handler panic", "panic", fmt.Sprint(v), "path", r.URL.Path)
			plain(w, http.StatusInternalServerError, "internal error\n")
		}
	}()
	if headerBytes(r, MaxHeaderBytes) > MaxHeaderBytes {
		h.c.headersTooLarge.Add(1)
		plain(w, http.StatusRequestHeaderFieldsTooLarge, "request header fields too large\n")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.c.methodsRefused.Add(1)
		w.Header().Set("Allow", "GET, HEAD")
		plain(w, http.StatusMethodNotAllowed, "method not allowed\n")
		return
	}
	switch p := r.URL.Path; {
	case p == PathChain:
		h.c.chains.Add(1)
		writeScript(w, http.StatusOK, h.chain, 0)
	case p == PathBoot:
		h.serveBoot(w, r)
	case strings.HasPrefix(p, PathFiles):
		h.serveFile(w, r, strings.TrimPrefix(p, PathFiles))
	default:
		h.c.notFound.Add(1)
		plain(w, http.StatusNotFound, "not found\n")
	}
}

func (h *Handler) serveBoot(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q, err := ParseQuery(r.URL.RawQuery)
	if err != nil {
		h.c.badRequests.Add(1)
		h.log.Debug("ipxe: query refused", "err", err, "remote", r.RemoteAddr)
		h.script(w, http.StatusBadRequest, Exit{}, 0)
		return
	}
	log := h.log.With("mac", q.MAC.String())
	epoch, active := h.cfg.Fence.Active()
	if !active || epoch == 0 {
		h.c.fenced.Add(1)
		log.Info("ipxe: fenced, machine told to reboot")
		h.script(w, http.StatusServiceUnavailable, Fenced{Delay: h.cfg.FencedDelay}, 0)
		return
	}
	now := h.cfg.Now()
	e, ok, err := h.cfg.Entries.Entry(ctx, q.MAC)
	if err != nil {
		h.fail(w, log, "entry lookup", err)
		return
	}
	if !ok || (!e.NotAfter.IsZero() && !now.Before(e.NotAfter)) {
		h.c.unknown.Add(1)
		h.discovered(r, q, now)
		h.script(w, http.StatusNotFound, Exit{}, 0)
		return
	}
	e.MAC = q.MAC
	if e.SanbootSHA256 != "" {
		h.serveSanboot(w, r, log, e)
		return
	}

	token, err := h.token(ctx, e, now)
	if errors.Is(err, ErrNotReady) {
		h.c.tokenWaits.Add(1)
		log.Info("ipxe: discovery token not available yet", "workflow", e.Workflow)
		h.script(w, http.StatusServiceUnavailable, Wait{Delay: h.cfg.TokenWait, URL: h.url(PathChain)}, h.cfg.TokenWait)
		return
	}
	if err != nil {
		h.fail(w, log, "discovery token", err)
		return
	}
	var cache string
	if h.cfg.Cache != nil {
		if cache, err = h.cfg.Cache.CacheURL(ctx, e); err != nil {
			// The ramdisk falls back to the images' source URLs; boot without bc.cache.
			log.Warn("ipxe: no cache URL for this boot", "err", err)
			cache = ""
		}
	}
	claims := Claims{
		MAC: q.MAC, IP: q.IP, UUID: q.UUID, Workflow: e.Workflow, Epoch: epoch,
		IssuedAt: now, NotAfter: now.Add(MaxAssertionLifetime),
	}
	if !claims.IP.IsValid() {
		claims.IP = remoteAddr(r)
	}
	if claims.UUID == (hwid.UUID{}) || claims.UUID.IsPlaceholder() {
		claims.UUID = e.UUID
	}
	if !e.NotAfter.IsZero() && e.NotAfter.Before(claims.NotAfter) {
		claims.NotAfter = e.NotAfter
	}
	assertion, err := h.cfg.Signer.Sign(ctx, claims)
	if err != nil {
		h.fail(w, log, "assertion", err)
		return
	}
	body, err := h.bootScript(token, assertion, cache)
	if err != nil {
		h.fail(w, log, "boot script", err)
		return
	}
	h.c.scripts.Add(1)
	log.Info("ipxe: boot script", "workflow", e.Workflow, "epoch", epoch)
	writeScript(w, http.StatusOK, body, 0)
}

func (h *Handler) serveSanboot(w http.ResponseWriter, r *http.Request, log *slog.Logger, e Entry) {
	ctx := r.Context()
	if !isSHA256(e.SanbootSHA256) {
		h.fail(w, log, "sanboot digest", invalidErr("sanboot_sha256", "not 64 lower-case hex digits"))
		return
	}
	wait := func(why string) {
		h.c.sanbootWaits.Add(1)
		log.Info("ipxe: sanboot ISO not ready, machine waits", "sha256", e.SanbootSHA256, "why", why)
		h.script(w, http.StatusServiceUnavailable, Wait{Delay: h.cfg.SanbootWait, URL: h.url(PathChain)}, h.cfg.SanbootWait)
	}
	if h.cfg.Cache == nil {
		wait("no cache configured")
		return
	}
	ready, err := h.cfg.Cache.ISOReady(ctx, e.SanbootSHA256)
	if err != nil {
		h.fail(w, log, "sanboot readiness", err)
		return
	}
	if !ready {
		wait("not pinned as an iso image or not cached")
		return
	}
	u, err := h.cfg.Cache.SanbootURL(ctx, e)
	if errors.Is(err, ErrNotReady) {
		wait("no grant yet")
		return
	}
	if err != nil {
		h.fail(w, log, "sanboot grant", err)
		return
	}
	body, err := Sanboot{URL: u, Retry: h.cfg.Retry, Again: h.url(PathChain)}.Render()
	if err != nil {
		h.fail(w, log, "sanboot script", err)
		return
	}
	h.c.sanboots.Add(1)
	log.Info("ipxe: sanboot script", "workflow", e.Workflow, "sha256", e.SanbootSHA256)
	writeScript(w, http.StatusOK, body, 0)
}

// token returns the entry's discovery token, asking the host only the first time.
func (h *Handler) token(ctx context.Context, e Entry, now time.Time) (string, error) {
	h.mu.Lock()
	c, ok := h.tokens[e.MAC]
	h.mu.Unlock()
	if ok && c.workflow == e.Workflow && c.notAfter.Equal(e.NotAfter) && now.Before(c.expires) {
		return c.token, nil
	}
	key := e.MAC.String() + "\x00" + strconv.FormatInt(e.NotAfter.UnixNano(), 10) + "\x00" + e.Workflow
	v, err, _ := h.sf.Do(key, func() (any, error) {
		h.c.tokenFetches.Add(1)
		tok, err := h.cfg.Tokens.Token(ctx, e)
		if err != nil {
			return "", err
		}
		if err := checkWord(ParamToken, tok); err != nil {
			return "", err
		}
		if tok == "" {
			return "", invalidErr(ParamToken, "empty token")
		}
		expires := e.NotAfter
		if expires.IsZero() {
			expires = now.Add(DefaultEntryLifetime)
		}
		h.storeToken(e, cachedToken{workflow: e.Workflow, notAfter: e.NotAfter, token: tok, expires: expires}, now)
		return tok, nil
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

func (h *Handler) storeToken(e Entry, c cachedToken, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.tokens[e.MAC]; !ok && len(h.tokens) >= h.cfg.MaxTokens {
		var oldest hwid.MAC
		var oldestAt time.Time
		for m, t := range h.tokens {
			if !now.Before(t.expires) {
				delete(h.tokens, m)
				continue
			}
			if oldestAt.IsZero() || t.expires.Before(oldestAt) {
				oldest, oldestAt = m, t.expires
			}
		}
		if len(h.tokens) >= h.cfg.MaxTokens {
			delete(h.tokens, oldest)
		}
	}
	h.tokens[e.MAC] = c
}

func (h *Handler) discovered(r *http.Request, q Query, now time.Time) {
	if r.Method != http.MethodGet || h.cfg.OnDiscovered == nil {
		return
	}
	if h.cfg.DHCPSeen != nil && !h.cfg.DHCPSeen(q.MAC) {
		return
	}
	h.c.discovered.Add(1)
	h.cfg.OnDiscovered(Discovery{MAC: q.MAC, UUID: q.UUID, IP: q.IP, Remote: remoteAddr(r), At: now})
}

func (h *Handler) fail(w http.ResponseWriter, log *slog.Logger, what string, err error) {
	h.c.errors.Add(1)
	log.Error("ipxe: cannot answer a script", "step", what, "err", err)
	// The machine retries (iPXE honours Retry-After) rather than falling through.
	h.script(w, http.StatusInternalServerError, Wait{Delay: h.cfg.TokenWait, URL: h.url(PathChain)}, h.cfg.TokenWait)
}

// script renders s and writes it; the scripts given here render for any validated config.
func (h *Handler) script(w http.ResponseWriter, status int, s interface{ Render() ([]byte, error) }, retryAfter time.Duration) {
	body, err := s.Render()
	if err != nil {
		h.c.errors.Add(1)
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

func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, name string) {
	notFound := func() {
		h.c.notFound.Add(1)
		plain(w, http.StatusNotFound, "not found\n")
	}
	if h.cfg.Files == nil || !validFileName(name) {
		notFound()
		return
	}
	f, err := h.cfg.Files.Open(name)
	if err != nil {
		notFound()
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		notFound()
		return
	}
	h.c.files.Add(1)
	w.Header().Set("Content-Type", "application/octet-stream")
	if rs, ok := f.(io.ReadSeeker); ok {
		http.ServeContent(w, r, name, st.ModTime(), rs)
		return
	}
	// An fs.FS whose files cannot seek: the whole file, no ranges.
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = io.Copy(w, io.LimitReader(f, st.Size()))
	}
}

// validFileName accepts one path element of [A-Za-z0-9._-], not starting with '.'.
func validFileName(s string) bool {
	if s == "" || len(s) > 128 || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-') {
			return false
		}
	}
	return true
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

// headerBytes counts the request line and header fields as they were sent ("Name: value"
// plus CRLF each), stopping once the count passes limit.
func headerBytes(r *http.Request, limit int) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
			if n > limit {
				return n
			}
		}
	}
	return n + 2
}

// LimitHeaders wraps next so that a request whose header (request line and fields) is over
// limit bytes gets 431 without reaching next. net/http's own MaxHeaderBytes allows 4 KiB
// more than it is set to; this is the exact cap.
func LimitHeaders(next http.Handler, limit int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerBytes(r, limit) > limit {
			plain(w, http.StatusRequestHeaderFieldsTooLarge, "request header fields too large\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// NewServer returns an http.Server for the boot endpoint (and anything else the host mounts
// on handler, e.g. the image cache): headers capped at MaxHeaderBytes, a 10 s header read
// timeout and a 2 min idle timeout. The caller sets Addr or calls Serve on its listener.
func NewServer(handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           LimitHeaders(handler, MaxHeaderBytes),
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}
