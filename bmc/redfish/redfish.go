package redfish

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// Name is the driver's name.
const Name = "redfish"

// Defaults used when a Config field is zero.
const (
	DefaultTimeout      = 30 * time.Second // per HTTP request
	DefaultPollInterval = 5 * time.Second  // between task-monitor polls
	DefaultTaskTimeout  = time.Hour        // a firmware update task, from start to end
	DefaultPowerTimeout = 2 * time.Minute  // a power action, until the state reads back
	DefaultSettleTime   = 3 * time.Second  // a boot override, until it is read back again
	DefaultRetries      = 3                // further tries of a request the BMC refused for now
	DefaultRetryWait    = 5 * time.Second  // between them
)

// Config is the driver's configuration, shared by every target it opens. It implements
// bmc.Opener, so a host registers it directly: reg.Register("redfish", redfish.Config{}).
type Config struct {
	// RootCAs verifies BMC certificates; nil means the system roots. A target's
	// CertSHA256 or Insecure overrides it for that target.
	RootCAs *x509.CertPool
	// BasicAuth sends the credentials on every request instead of opening a session.
	// Sessions are the default: BMCs log basic-auth requests as separate logins. A BMC
	// without a SessionService (sushy-emulator, some OpenBMC builds) gets basic auth
	// anyway unless SessionOnly is set; the driver learns that once per Open.
	BasicAuth bool
	// SessionOnly refuses the basic-auth fallback: a BMC without a SessionService is then
	// an ErrUnsupported error from Open.
	SessionOnly bool
	// Timeout bounds each HTTP request; zero means DefaultTimeout. A context deadline
	// shorter than it wins.
	Timeout time.Duration
	// PollInterval is the wait between task-monitor polls; zero means DefaultPollInterval.
	// A Retry-After shorter than it is honoured.
	PollInterval time.Duration
	// TaskTimeout bounds following one firmware task, and the wait for a volume created
	// or deleted to be listed so; zero means DefaultTaskTimeout.
	TaskTimeout time.Duration
	// PowerTimeout bounds the wait, after a power action the BMC accepted, for the machine
	// to report the state asked for; zero means DefaultPowerTimeout.
	PowerTimeout time.Duration
	// SettleTime is how long after a boot override read back as asked the driver reads it
	// once more: a BMC that took the write and dropped it since (a Supermicro AMI BMC:
	// bmclib #459) is then an ErrDiffers error saying it reverted. Zero means
	// DefaultSettleTime; negative skips the second read.
	SettleTime time.Duration
	// Retries is how many more times a request is sent after the BMC refused it with a
	// passing error (iDRAC SYS518 while reloading, iLO's InvalidOperationForSystemState
	// right after a power change, 503 ServiceTemporarilyUnavailable) or refused the
	// connection; zero means DefaultRetries, negative none. A request whose outcome is
	// unknown (a timeout, a connection lost after sending) is never sent again.
	Retries int
	// RetryWait is the wait between those tries; zero means DefaultRetryWait.
	RetryWait time.Duration
	// Logger receives the vendor workarounds applied and session events; nil discards.
	Logger *slog.Logger
	// OnOp, when set, is called after each operation (and each task-monitor poll) with
	// its outcome; it must not block.
	OnOp func(bmc.OpEvent)
}

// Open implements bmc.Opener.
func (c Config) Open(ctx context.Context, t bmc.Target) (bmc.Driver, error) {
	d, err := Dial(ctx, c, t)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Driver is an open Redfish connection to one BMC, bound to its first ComputerSystem.
// Its methods are safe for concurrent use; requests to the BMC are made one at a time.
type Driver struct {
	cfg      Config
	target   bmc.Target
	endpoint string
	hc       *http.Client
	log      *slog.Logger

	mu       sync.Mutex
	api      *gofish.APIClient
	password string
	sysPath  string
	closed   bool
	learned  learned
	ctxs     sync.Map    // *gofish.APIClient -> the context of the operation using it
	opened   atomic.Bool // Dial succeeded: a refused connection is then a gap, retried
}

// learned is what the driver found out about this BMC: kept for the life of the Open so
// that no call pays for a refusal an earlier one already met.
type learned struct {
	basicAuth       bool // no SessionService: basic auth on every request
	noBootMode      bool // BootSourceOverrideMode is refused in a Boot PATCH
	needsBootMode   bool // a Boot PATCH without BootSourceOverrideMode is refused
	noContinuous    bool // BootSourceOverrideEnabled Continuous is refused
	noPatchIfMatch  bool // PATCH with If-Match is refused whatever the ETag
	noActionIfMatch bool // action POSTs with If-Match are refused
	mediaByPatch    bool // VirtualMedia has no Insert/Eject actions: PATCH it
	bootSettings    bool // the system's Boot is read-only: the settings object takes it
	suspectImages   map[string]bool
}

// knows returns a copy of what the driver has learned (without suspectImages: see
// suspect).
func (d *Driver) knows() learned {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.learned
	l.suspectImages = nil
	return l
}

// suspect reports whether an insert of image failed on this Open, and with clear, forgets it.
func (d *Driver) suspect(image string, clear bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.learned.suspectImages[image]
	if clear {
		delete(d.learned.suspectImages, image)
	}
	return s
}

// learn records something found out about the BMC.
func (d *Driver) learn(what string, f func(*learned)) {
	d.mu.Lock()
	f(&d.learned)
	d.mu.Unlock()
	d.log.Info("redfish: learned about the BMC", "addr", d.endpoint, "what", what)
}

// Learned lists what the driver has found out about this BMC since Open (the refusals
// it now avoids), for logs and tests. The names are stable.
func (d *Driver) Learned() []string {
	l := d.knows()
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{
		{l.basicAuth, "basic-auth"}, {l.noBootMode, "no-boot-mode"}, {l.needsBootMode, "needs-boot-mode"},
		{l.noContinuous, "no-continuous-boot"}, {l.noPatchIfMatch, "no-patch-if-match"},
		{l.noActionIfMatch, "no-action-if-match"}, {l.mediaByPatch, "media-by-patch"},
		{l.bootSettings, "boot-settings-object"},
	} {
		if f.on {
			out = append(out, f.name)
		}
	}
	return out
}

func (d *Driver) basic() bool { return d.cfg.BasicAuth || d.knows().basicAuth }

var (
	_ bmc.Driver                 = (*Driver)(nil)
	_ bmc.PowerController        = (*Driver)(nil)
	_ bmc.BootController         = (*Driver)(nil)
	_ bmc.Inspector              = (*Driver)(nil)
	_ bmc.VirtualMediaController = (*Driver)(nil)
	_ bmc.FirmwareUpdater        = (*Driver)(nil)
	_ bmc.StorageLister          = (*Driver)(nil)
	_ bmc.CredentialRotator      = (*Driver)(nil)
)

// Dial connects to the BMC at t.Address, logs in (unless cfg.BasicAuth) and finds its
// ComputerSystem. Close the driver to log out.
func Dial(ctx context.Context, cfg Config, t bmc.Target) (d *Driver, err error) {
	if cfg.OnOp != nil {
		start := time.Now()
		defer func() {
			cfg.OnOp(bmc.OpEvent{Driver: Name, Op: "open", Addr: t.Address, Duration: time.Since(start), Err: err})
		}()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.TaskTimeout <= 0 {
		cfg.TaskTimeout = DefaultTaskTimeout
	}
	if cfg.PowerTimeout <= 0 {
		cfg.PowerTimeout = DefaultPowerTimeout
	}
	d = &Driver{cfg: cfg, target: t, password: t.Password, log: cfg.Logger}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	ep, err := endpoint(t.Address)
	if err != nil {
		return nil, d.opErr("open", bmc.ErrInvalid, err.Error(), nil)
	}
	if len(t.CertSHA256) != 0 && len(t.CertSHA256) != sha256.Size {
		return nil, d.opErr("open", bmc.ErrInvalid, "CertSHA256 must be 32 bytes", nil)
	}
	d.endpoint = ep
	d.hc = &http.Client{Transport: gapRetry{d: d, rt: d.transport()}, Timeout: cfg.Timeout}
	if err := d.login(ctx); err != nil {
		d.hc.CloseIdleConnections()
		return nil, err
	}
	api := d.client(ctx)
	var root struct{ Systems odataID }
	_, err = getRaw(api, "/redfish/v1/", &root)
	var systems []string
	if err == nil {
		systems, err = newBudget().members(api, root.Systems.ID)
	}
	if err != nil || len(systems) == 0 {
		_ = d.Close()
		if err == nil {
			return nil, d.opErr("open", bmc.ErrUnsupported, "the service lists no ComputerSystem", nil)
		}
		return nil, d.classify("open", err)
	}
	d.sysPath = systems[0]
	d.opened.Store(true)
	return d, nil
}

// endpoint turns an address into scheme://host[:port].
func endpoint(addr string) (string, error) {
	if addr == "" {
		return "", errors.New("empty address")
	}
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", errors.New("address is not a URL")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", errors.New("address scheme must be https or http")
	}
	if u.Host == "" || u.User != nil {
		return "", errors.New("address needs a host and no user info")
	}
	return u.Scheme + "://" + u.Host, nil
}

// transport builds this driver's own transport: nothing it sets reaches another client.
func (d *Driver) transport() *http.Transport {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: d.cfg.RootCAs}
	switch {
	case len(d.target.CertSHA256) == sha256.Size:
		pin := d.target.CertSHA256
		// The chain is not checked: the pin is the trust. Only the leaf's digest counts.
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errPinMismatch
			}
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(sum[:], pin) != 1 {
				return errPinMismatch
			}
			return nil
		}
	case d.target.Insecure:
		tc.InsecureSkipVerify = true
	}
	dialer := &net.Dialer{Timeout: d.cfg.Timeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   min(d.cfg.Timeout, 15*time.Second),
		ResponseHeaderTimeout: d.cfg.Timeout,
		MaxIdleConns:          4,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
	}
}

var errPinMismatch = errors.New("redfish: certificate does not match the pinned SHA-256")

// login opens a new gofish client (and session unless basic auth) and installs it. A BMC
// without a SessionService gets basic auth instead, learned once, unless SessionOnly.
func (d *Driver) login(ctx context.Context) error {
	d.mu.Lock()
	pw := d.password
	d.mu.Unlock()
	connect := func(basic bool) (*gofish.APIClient, error) {
		return gofish.ConnectContext(ctx, gofish.ClientConfig{
			Endpoint:          d.endpoint,
			Username:          d.target.Username,
			Password:          pw,
			HTTPClient:        d.hc,
			NoModifyTransport: true,
			BasicAuth:         basic,
			ReuseConnections:  true,
		})
	}
	basic := d.basic()
	api, err := connect(basic)
	if err != nil && !basic && noSessionService(err) {
		if d.cfg.SessionOnly {
			return d.opErr("login", bmc.ErrUnsupported,
				"the BMC has no SessionService and SessionOnly forbids basic auth", err)
		}
		d.learn("no SessionService: basic auth", func(l *learned) { l.basicAuth = true })
		api, err = connect(true)
	}
	if err != nil {
		if e := d.protocolMismatch(ctx, err); e != nil {
			return e
		}
		return d.classify("login", err)
	}
	if s, err := api.GetSession(); err == nil {
		d.log.Debug("redfish: session opened", "addr", d.endpoint, "session", s.ID)
	}
	d.mu.Lock()
	d.api = api
	d.mu.Unlock()
	return nil
}

// plainHTTP reports whether a TLS handshake met a plain-HTTP server.
func plainHTTP(err error) bool {
	var rh tls.RecordHeaderError
	return errors.As(err, &rh) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// noSessionService reports whether a session login failed because the BMC has no
// SessionService: the service root links none (gofish then has no target to POST to),
// or the POST is answered as not found or not allowed.
func noSessionService(err error) bool {
	var re *schemas.Error
	if !errors.As(err, &re) {
		// gofish's own error when the root links no Sessions: nothing was sent.
		return strings.Contains(err.Error(), "no target provided")
	}
	switch re.HTTPReturnedStatusCode {
	case 0:
		return strings.Contains(re.Error(), "no target provided")
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return true
	}
	return false
}

// protocolMismatch turns a failed first contact into an ErrScheme error when the address's
// scheme does not match what the port speaks: http:// to a TLS port (probed with a
// handshake, since a TLS server's answer to plain HTTP is a close, an alert or a 400),
// or https:// to a plain-HTTP port. It returns nil when neither applies.
func (d *Driver) protocolMismatch(ctx context.Context, err error) error {
	if plainHTTP(err) {
		return d.opErr("login", bmc.ErrScheme, "the BMC answered plain HTTP at this address: use http://, or turn on its TLS", err)
	}
	if !strings.HasPrefix(d.endpoint, "http://") {
		return nil
	}
	// What plain HTTP to a TLS port looks like: the server closes or resets the
	// connection, answers a TLS alert (a "malformed HTTP response"), or, if it is Go's,
	// a 400 saying so. Timeouts and refused connections are not probed.
	var re *schemas.Error
	var netErr net.Error
	switch {
	case errors.As(err, &re):
		if re.HTTPReturnedStatusCode != http.StatusBadRequest || !strings.Contains(re.Error(), "HTTPS") {
			return nil
		}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.As(err, &netErr) && netErr.Timeout(), errors.Is(err, syscall.ECONNREFUSED):
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		strings.Contains(err.Error(), "malformed HTTP"):
	default:
		return nil
	}
	u, perr := url.Parse(d.endpoint)
	if perr != nil {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	pctx, cancel := context.WithTimeout(ctx, min(d.cfg.Timeout, 5*time.Second))
	defer cancel()
	// Only a handshake, to learn whether the port speaks TLS (any version, any
	// certificate); nothing is sent over it.
	dialer := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10}}
	c, derr := dialer.DialContext(pctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if derr != nil {
		return nil
	}
	_ = c.Close()
	return d.opErr("login", bmc.ErrScheme, "the BMC speaks TLS at this address: use https://", err)
}

// client returns the current gofish client bound to ctx.
func (d *Driver) client(ctx context.Context) *gofish.APIClient {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.api.WithContext(ctx)
}

// do runs fn with a client bound to ctx. When a session has expired (401) it logs in
// again once and retries: a 401 means the BMC did not act on the request.
func (d *Driver) do(ctx context.Context, op string, fn func(*gofish.APIClient) error) (err error) {
	if d.cfg.OnOp != nil {
		start := time.Now()
		defer func() {
			d.cfg.OnOp(bmc.OpEvent{Driver: Name, Op: op, Addr: d.target.Address, Duration: time.Since(start), Err: err})
		}()
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return d.opErr(op, bmc.ErrClosed, "", nil)
	}
	err = d.run(ctx, fn)
	if err == nil {
		return nil
	}
	if d.basic() || !isStatus(err, http.StatusUnauthorized) || ctx.Err() != nil {
		return d.classify(op, err)
	}
	d.log.Info("redfish: session rejected, logging in again", "addr", d.endpoint, "op", op)
	if lerr := d.login(ctx); lerr != nil {
		return lerr
	}
	if err := d.run(ctx, fn); err != nil {
		return d.classify(op, err)
	}
	return nil
}

// run calls fn with a client bound to ctx, known to retrying as ctx's.
func (d *Driver) run(ctx context.Context, fn func(*gofish.APIClient) error) error {
	c := d.client(ctx)
	d.ctxs.Store(c, ctx)
	defer d.ctxs.Delete(c)
	return fn(c)
}

// Name implements bmc.Driver.
func (d *Driver) Name() string { return Name }

// Close logs the session out (bounded by the driver's timeout) and closes idle
// connections. A second Close returns nil.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed || d.api == nil {
		d.closed = true
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	api := d.api
	d.mu.Unlock()
	defer d.hc.CloseIdleConnections()
	s, err := api.GetSession()
	if err != nil {
		return nil // basic auth: nothing to log out
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout)
	defer cancel()
	if err := api.WithContext(ctx).Service.DeleteSession(s.ID); err != nil {
		return d.classify("logout", err)
	}
	d.log.Debug("redfish: session closed", "addr", d.endpoint, "session", s.ID)
	return nil
}

// validPath reports whether p, a link the BMC gave, is a path on the BMC itself. Links are
// appended to the endpoint, so "@other.host/x" or "//other.host/x" would send the request
// (and its credentials) elsewhere.
func validPath(p string) bool {
	if !strings.HasPrefix(p, "/redfish/") || strings.HasPrefix(p, "//") || len(p) > 1024 {
		return false
	}
	for _, r := range p {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`\@#"<>{}|^`+"`", r) {
			return false
		}
	}
	return !strings.Contains(p, "/../") && !strings.HasSuffix(p, "/..")
}

var errBadLink = errors.New("redfish: the BMC gave a link that is not a path on the BMC")

// getRaw fetches a resource, returning its body and ETag (the header, or the body's
// @odata.etag when the BMC sends no header).
func getRaw(c *gofish.APIClient, p string, v any) (etag string, err error) {
	if !validPath(p) {
		return "", errBadLink
	}
	resp, err := c.Get(p)
	if err != nil {
		return "", err
	}
	defer schemas.DeferredCleanupHTTPResponse(resp)
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return "", &decodeError{path: p, err: err}
	}
	etag = resp.Header.Get("ETag")
	if etag == "" {
		var tag struct {
			ETag string `json:"@odata.etag"`
		}
		if json.Unmarshal(b, &tag) == nil {
			etag = tag.ETag
		}
	}
	return etag, nil
}

type decodeError struct {
	path string
	err  error
}

func (e *decodeError) Error() string {
	return "redfish: malformed JSON at " + e.path + ": " + e.err.Error()
}
func (e *decodeError) Unwrap() error { return e.err }

// answer is what a BMC said to a write it accepted.
type answer struct {
	status   int
	location string
	body     []byte
	// notes are the messages of a 2xx body's @Message.ExtendedInfo whose severity is not OK:
	// DSP0266 has a service that skips some properties of a PATCH answer 200 with them.
	notes []string
}

// readAnswer reads an accepted response. A 2xx whose body is a Redfish error object is
// turned into that error: some BMCs (iDRAC) answer 200 and an error body.
func readAnswer(resp *http.Response) (answer, error) {
	defer schemas.DeferredCleanupHTTPResponse(resp)
	a := answer{status: resp.StatusCode, location: resp.Header.Get("Location")}
	a.body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if len(a.body) == 0 {
		return a, nil
	}
	var probe struct {
		Error *json.RawMessage `json:"error"`
		Info  []struct {
			Message  string
			Severity string
		} `json:"@Message.ExtendedInfo"`
	}
	if json.Unmarshal(a.body, &probe) != nil {
		return a, nil
	}
	if probe.Error != nil {
		return a, schemas.ConstructError(resp.StatusCode, a.body)
	}
	for _, m := range probe.Info {
		if m.Message != "" && m.Severity != "" && m.Severity != "OK" {
			a.notes = append(a.notes, m.Message)
		}
	}
	return a, nil
}

// patch sends a PATCH with If-Match when an ETag is known. On 412 it fetches a fresh
// ETag and retries; on a second 412 it retries without If-Match (some BMCs refuse the
// header outright) and remembers that for this BMC. A 428 (the BMC wants If-Match and
// none was sent) fetches the ETag and retries once with it.
func (d *Driver) patch(c *gofish.APIClient, p, etag string, payload any) (answer, error) {
	if !validPath(p) {
		return answer{}, errBadLink
	}
	if d.knows().noPatchIfMatch {
		etag = ""
	}
	send := func(tag string) (answer, error) {
		h := map[string]string{}
		if tag != "" {
			h["If-Match"] = tag
		}
		var a answer
		err := d.retrying(c, "PATCH "+p, func() error {
			resp, err := c.PatchWithHeaders(p, payload, h)
			if err != nil {
				return err
			}
			a, err = readAnswer(resp)
			return err
		})
		return a, err
	}
	a, err := send(etag)
	fresh := func() string {
		var discard map[string]any
		tag, gerr := getRaw(c, p, &discard)
		if gerr != nil {
			return ""
		}
		return tag
	}
	switch {
	case etag == "" && isStatus(err, http.StatusPreconditionRequired):
		if tag := fresh(); tag != "" {
			return send(tag)
		}
		return a, err
	case etag == "" || !isStatus(err, http.StatusPreconditionFailed):
		return a, err
	}
	if tag := fresh(); tag != "" && tag != etag {
		if a, err = send(tag); !isStatus(err, http.StatusPreconditionFailed) {
			return a, err
		}
	}
	d.learn("PATCH If-Match refused: patching without it", func(l *learned) { l.noPatchIfMatch = true })
	return send("")
}

// action POSTs an action's parameters to target, with If-Match when the resource's ETag
// is known and the BMC has not refused the header on actions (DSP0266 lets a service
// check If-Match on POST); a 412 is retried once without it and remembered.
func (d *Driver) action(c *gofish.APIClient, target, etag string, body any) (answer, error) {
	return d.gatedAction(c, target, etag, body, nil)
}

// gatedAction is action, calling gate (when not nil) immediately before each time the
// request is sent; nothing is sent when it fails.
func (d *Driver) gatedAction(c *gofish.APIClient, target, etag string, body any, gate func() error) (answer, error) {
	if !validPath(target) {
		return answer{}, errBadLink
	}
	if d.knows().noActionIfMatch {
		etag = ""
	}
	h := map[string]string{}
	if etag != "" {
		h["If-Match"] = etag
	}
	var a answer
	post := func(h map[string]string) error {
		return d.retrying(c, "POST "+target, func() error {
			if gate != nil {
				if err := gate(); err != nil {
					return err
				}
			}
			resp, err := c.PostWithHeaders(target, body, h)
			if err != nil {
				return err
			}
			a, err = readAnswer(resp)
			return err
		})
	}
	err := post(h)
	if etag != "" && isStatus(err, http.StatusPreconditionFailed) {
		d.learn("action If-Match refused: posting without it", func(l *learned) { l.noActionIfMatch = true })
		err = post(nil)
	}
	return a, err
}

func isStatus(err error, code int) bool {
	var re *schemas.Error
	return errors.As(err, &re) && re.HTTPReturnedStatusCode == code
}

// mentions reports whether a Redfish error names any of the words in its message, code
// or extended info.
func mentions(err error, words ...string) bool {
	var re *schemas.Error
	if !errors.As(err, &re) {
		return false
	}
	var b strings.Builder
	b.WriteString(re.Code + " " + re.Message)
	for _, m := range re.ExtendedInfos {
		b.WriteString(" " + m.MessageID + " " + m.Message + " " + strings.Join(m.MessageArgs, " "))
		for _, rp := range m.RelatedProperties {
			b.WriteString(" " + rp)
		}
	}
	s := b.String()
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func (d *Driver) opErr(op string, kind error, msg string, err error) *bmc.OpError {
	return &bmc.OpError{Driver: Name, Op: op, Addr: d.target.Address, Kind: kind, Message: msg, Err: err}
}

// classify turns a gofish or transport error into a *bmc.OpError.
func (d *Driver) classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var oe *bmc.OpError
	if errors.As(err, &oe) {
		return err
	}
	e := d.opErr(op, bmc.ErrRefused, "", err)
	var re *schemas.Error
	var netErr net.Error
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	var verifyErr *tls.CertificateVerificationError
	var de *decodeError
	switch {
	case errors.As(err, &re):
		e.Code, e.Message = redfishCode(re), redfishMessage(re)
		switch code := re.HTTPReturnedStatusCode; {
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			e.Kind = bmc.ErrAuth
		case code == http.StatusNotFound || code == http.StatusMethodNotAllowed || code == http.StatusNotImplemented:
			e.Kind = bmc.ErrUnsupported
		case code == 0:
			// gofish reports transport failures without a status.
			e.Kind = bmc.ErrUnreachable
		}
		// The Base registry's message for a full session table (iLO, XCC and others answer
		// it with 503 on a session login): the same kind as IPMI's full session table.
		if strings.Contains(e.Code, "SessionLimitExceeded") {
			e.Kind = bmc.ErrNoSession
		}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		e.Kind, e.Message = bmc.ErrTimeout, "no answer before the deadline"
	case errors.Is(err, errPinMismatch), errors.As(err, &unknownCA), errors.As(err, &hostErr),
		errors.As(err, &invalidCert), errors.As(err, &verifyErr):
		e.Kind, e.Message = bmc.ErrTLS, "the BMC's certificate is not trusted: pin it (CertSHA256), add its CA, or set Insecure"
	case plainHTTP(err):
		e.Kind, e.Message = bmc.ErrScheme, "the BMC answered plain HTTP at this address: use http://"
	case errors.As(err, &netErr) && netErr.Timeout():
		e.Kind, e.Message = bmc.ErrTimeout, "no answer in time"
	case errors.As(err, &dnsErr), errors.As(err, &opErr):
		e.Kind, e.Message = bmc.ErrUnreachable, "cannot connect to the BMC"
	case errors.As(err, &de):
		e.Message = "the BMC answered malformed JSON"
	case errors.Is(err, errBadLink), errors.Is(err, errTooMany):
		e.Message = err.Error()
	default:
		var ue *url.Error
		if errors.As(err, &ue) {
			e.Kind, e.Message = bmc.ErrUnreachable, "cannot talk to the BMC"
		}
	}
	return e
}

func redfishCode(re *schemas.Error) string {
	code := re.Code
	if code == "" && len(re.ExtendedInfos) > 0 {
		code = re.ExtendedInfos[0].MessageID
	}
	if re.HTTPReturnedStatusCode == 0 {
		return code
	}
	return strings.TrimSpace(strconv.Itoa(re.HTTPReturnedStatusCode) + " " + code)
}

func redfishMessage(re *schemas.Error) string {
	var parts []string
	for _, m := range re.ExtendedInfos {
		if m.Message != "" {
			parts = append(parts, m.Message)
		}
	}
	if len(parts) == 0 && re.Message != "" {
		parts = append(parts, re.Message)
	}
	msg := strings.Join(parts, "; ")
	if len(msg) > 512 {
		msg = msg[:512] + "..."
	}
	return msg
}
