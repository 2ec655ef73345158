package ipxe

import (
	"net/http"
	"time"
)

// Limits of every HTTP path a boot server serves: the boot handler, the iPXE builds, the
// image cache and the metrics. [NewServer] applies all of them; a host that builds its own
// http.Server sets these values and wraps its handler in [LimitHeaders].
const (
	// MaxHeaderBytes caps a request's header: the request line and every header field
	// counted as "Name: value\r\n".
	MaxHeaderBytes = 8 << 10
	// ReadHeaderTimeout bounds reading a request's header.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading a whole request. The boot paths take no body, so this
	// only ends a client that trickles one.
	ReadTimeout = 30 * time.Second
	// IdleTimeout closes a keep-alive connection with no request for this long.
	IdleTimeout = 2 * time.Minute
)

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
// on handler: the image cache, metrics) with every limit above: headers capped at
// MaxHeaderBytes (exactly, by LimitHeaders), ReadHeaderTimeout, ReadTimeout and
// IdleTimeout. No write timeout: an ISO served by ranges may take long. The caller sets Addr,
// ErrorLog, or calls Serve on its listener.
func NewServer(handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           LimitHeaders(handler, MaxHeaderBytes),
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
	}
}
