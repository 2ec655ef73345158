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
)

// Config is the driver's configuration, shared by every target it opens. It implements
// bmc.Opener, so a host registers it directly: reg.Register("redfish", redfish.Config{}).
type Config struct {
	// RootCAs verifies BMC certificates; nil means the system roots. A target's
	// CertSHA256 or Insecure overrides it for that target.
	RootCAs *x509.CertPool
	// BasicAuth sends the credentials on every request instead of opening a session.
	// Sessions are the default: BMCs log basic-auth requests as separate logins.
	BasicAuth bool
	// Timeout bounds each HTTP request; zero means DefaultTimeout. A context deadline
	// shorter than it wins.
	Timeout time.Duration
	// PollInterval is the wait between task-monitor polls; zero means DefaultPollInterval.
	// A Retry-After shorter than it is honoured.
	PollInterval time.Duration
	// TaskTimeout bounds following one firmware task; zero means DefaultTaskTimeout.
	TaskTimeout time.Duration
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
}

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
	d.hc = &http.Client{Transport: d.transport(), Timeout: cfg.Timeout}
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

// login opens a new gofish client (and session unless basic auth) and installs it.
func (d *Driver) login(ctx context.Context) error {
	d.mu.Lock()
	pw := d.password
	d.mu.Unlock()
	api, err := gofish.ConnectContext(ctx, gofish.ClientConfig{
		Endpoint:          d.endpoint,
		Username:          d.target.Username,
		Password:          pw,
		HTTPClient:        d.hc,
		NoModifyTransport: true,
		BasicAuth:         d.cfg.BasicAuth,
		ReuseConnections:  true,
	})
	if err != nil {
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
	err = fn(d.client(ctx))
	if err == nil {
		return nil
	}
	if d.cfg.BasicAuth || !isStatus(err, http.StatusUnauthorized) || ctx.Err() != nil {
		return d.classify(op, err)
	}
	d.log.Info("redfish: session rejected, logging in again", "addr", d.endpoint, "op", op)
	if lerr := d.login(ctx); lerr != nil {
		return lerr
	}
	if err := fn(d.client(ctx)); err != nil {
		return d.classify(op, err)
	}
	return nil
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

// getRaw fetches a resource, returning its body and ETag.
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
	return resp.Header.Get("ETag"), nil
}

type decodeError struct {
	path string
	err  error
}

func (e *decodeError) Error() string {
	return "redfish: malformed JSON at " + e.path + ": " + e.err.Error()
}
func (e *decodeError) Unwrap() error { return e.err }

// patch sends a PATCH with If-Match when an ETag is known. On 412 it fetches a fresh
// ETag and retries; on a second 412 it retries without If-Match (some BMCs refuse the
// header outright).
func (d *Driver) patch(c *gofish.APIClient, p, etag string, payload any) error {
	send := func(tag string) error {
		h := map[string]string{}
		if tag != "" {
			h["If-Match"] = tag
		}
		resp, err := c.PatchWithHeaders(p, payload, h)
		if err != nil {
			return err
		}
		schemas.DeferredCleanupHTTPResponse(resp)
		return nil
	}
	err := send(etag)
	if etag == "" || !isStatus(err, http.StatusPreconditionFailed) {
		return err
	}
	var discard map[string]any
	fresh, gerr := getRaw(c, p, &discard)
	if gerr == nil && fresh != "" && fresh != etag {
		if err = send(fresh); !isStatus(err, http.StatusPreconditionFailed) {
			return err
		}
	}
	d.log.Info("redfish: BMC refused If-Match, patching without it", "addr", d.endpoint, "path", p)
	return send("")
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
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		e.Kind, e.Message = bmc.ErrTimeout, "no answer before the deadline"
	case errors.Is(err, errPinMismatch), errors.As(err, &unknownCA), errors.As(err, &hostErr),
		errors.As(err, &invalidCert), errors.As(err, &verifyErr):
		e.Kind, e.Message = bmc.ErrTLS, "the BMC's certificate is not trusted: pin it (CertSHA256), add its CA, or set Insecure"
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
