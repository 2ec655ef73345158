package redfish

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// transientIDs are the ends of Redfish MessageIds with which a BMC refuses a request it
// did not act on, for a while: sent again later, it may succeed.
var transientIDs = []string{
	// iDRAC while its services reload (after a reset of the iDRAC, or during a job):
	// "iDRAC is not ready. The configuration values cannot be accessed."
	"SYS518",
	// iLO for a short time after a power change: "The operation was not successful due to
	// the current power state".
	"InvalidOperationForSystemState",
	// DSP0266's Base registry, with 503: "The service is temporarily unavailable".
	"ServiceTemporarilyUnavailable",
	// iDRAC, with 404, for a resource that exists while its services are still loading:
	// "Unable to complete the operation because the resource ... entered is not found",
	// seen creating a job (a firmware update, a reset). A 404 is a refusal, so sending
	// the request again is safe; where the resource really is missing, it costs the
	// retries and ends in the same 404.
	"SYS403",
}

// transient says whether err is a refusal the BMC reports as passing (its MessageId is
// one of transientIDs): the request was not acted on, so sending it again is safe for
// any request, destructive ones too. A timeout, or a connection lost after the request
// went out, is not transient: the BMC may have acted, and the request is never sent
// again. (Refused connections are retried below, in gapRetry.)
func transient(err error) (string, bool) {
	var re *schemas.Error
	if errors.As(err, &re) && re.HTTPReturnedStatusCode != 0 {
		ids := []string{re.Code}
		for _, m := range re.ExtendedInfos {
			ids = append(ids, m.MessageID)
		}
		for _, id := range ids {
			for _, t := range transientIDs {
				if id != "" && strings.HasSuffix(id, t) {
					return id, true
				}
			}
		}
		return "", false
	}
	return "", false
}

// refused says whether err is a connection the BMC refused: no request reached it.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNREFUSED)
}

// gapRetry sends a request again, up to Config.Retries times RetryWait apart, when the
// BMC refused the connection: iDRAC 5.x stops taking connections for about 20 s at
// times, and a refused connection carried nothing, so this is safe for any request. A
// request whose body cannot be had again is not resent, and nothing is retried while
// Dial runs: an address where nothing listens is ErrUnreachable at once.
type gapRetry struct {
	d  *Driver
	rt http.RoundTripper
}

func (g gapRetry) RoundTrip(r *http.Request) (*http.Response, error) {
	tries, wait := g.d.retryPolicy()
	for i := 0; ; i++ {
		resp, err := g.rt.RoundTrip(r)
		if err == nil || !refused(err) || !g.d.opened.Load() || i >= tries || (r.Body != nil && r.GetBody == nil) {
			return resp, err
		}
		g.d.log.Info("redfish: the BMC refused the connection, sending again", "addr", g.d.endpoint,
			"request", r.Method+" "+r.URL.Path, "try", i+2)
		t := time.NewTimer(wait)
		select {
		case <-r.Context().Done():
			t.Stop()
			return resp, err
		case <-t.C:
		}
		if r.GetBody != nil {
			body, berr := r.GetBody()
			if berr != nil {
				return resp, err
			}
			r = r.Clone(r.Context())
			r.Body = body
		}
	}
}

// retryPolicy is Config.Retries and RetryWait with their defaults.
func (d *Driver) retryPolicy() (int, time.Duration) {
	tries := d.cfg.Retries
	if tries == 0 {
		tries = DefaultRetries
	}
	wait := d.cfg.RetryWait
	if wait <= 0 {
		wait = DefaultRetryWait
	}
	return tries, wait
}

// retrying sends a request through send until it succeeds, fails for good, or
// Config.Retries further tries were spent on transient refusals, RetryWait apart (a
// Retry-After the BMC gives, if longer, instead). ctx is the operation's.
func (d *Driver) retrying(c *gofish.APIClient, what string, send func() error) error {
	tries, wait := d.retryPolicy()
	ctx := d.opContext(c)
	for i := 0; ; i++ {
		err := send()
		id, ok := transient(err)
		if err == nil || !ok || i >= tries || ctx.Err() != nil {
			return err
		}
		d.log.Info("redfish: the BMC refused for now, sending again", "addr", d.endpoint, "request", what,
			"reason", id, "try", i+2)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// opContext is the context the operation that owns c runs under.
func (d *Driver) opContext(c *gofish.APIClient) context.Context {
	if v, ok := d.ctxs.Load(c); ok {
		return v.(context.Context)
	}
	return context.Background()
}
