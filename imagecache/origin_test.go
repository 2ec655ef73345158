package imagecache_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// origin is an image source built on net/http's own ServeContent, the Range, If-Range,
// ETag and Last-Modified logic a Go file server uses: what it answers to a resume is what a
// real server answers, not a script. Tests switch its validator, make it ignore Range, hold
// a response part-way, or trickle.
type origin struct {
	srv  *httptest.Server
	sent atomic.Int64 // body bytes handed to the connection, all responses

	mu          sync.Mutex
	body        []byte
	etag        string
	modTime     time.Time
	ignoreRange bool
	holdAt      int64 // >0: the next response stops after this many body bytes until released
	holdOnce    bool  // only the first response is held
	trickle     bool  // one byte a second
	code        int   // non-zero: answer every request with this status
	throttle    int64 // non-zero: body bytes per second
	reqs        []originReq
	times       []time.Time // when each request came
	release     chan struct{}
	holding     chan struct{} // closed when a response reached holdAt
}

type originReq struct {
	Range, IfRange string
	Status         int
}

func newOrigin(t testing.TB, body []byte) *origin {
	o := &origin{body: body, etag: `"v1"`, modTime: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		release: make(chan struct{}), holding: make(chan struct{})}
	o.srv = httptest.NewUnstartedServer(o)
	// A small send buffer (64 KiB; the kernel doubles it) on each connection, so that what
	// the origin wrote is what reached the client's kernel, to within that much per
	// connection: on loopback nothing is in flight, and bytes still in a large send queue
	// (tcp_wmem allows 4 MiB) would be counted as downloaded when the client dies.
	o.srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetWriteBuffer(64 << 10)
		}
		return ctx
	}
	o.srv.Start()
	t.Cleanup(func() {
		o.mu.Lock()
		select {
		case <-o.release:
		default:
			close(o.release)
		}
		o.mu.Unlock()
		o.srv.CloseClientConnections()
		o.srv.Close()
	})
	return o
}

func (o *origin) URL() string { return o.srv.URL + "/image.raw" }

func (o *origin) set(f func(o *origin)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f(o)
}

func (o *origin) Requests() []originReq {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.reqs)
}

// Times returns when each request came.
func (o *origin) Times() []time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.times)
}

// Release lets held responses go on.
func (o *origin) Release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-o.release:
	default:
		close(o.release)
	}
}

func (o *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	body, etag, mod, trickle, code, throttle := o.body, o.etag, o.modTime, o.trickle, o.code, o.throttle
	o.times = append(o.times, time.Now())
	holdAt := o.holdAt
	if o.holdOnce {
		o.holdAt = 0
	}
	i := len(o.reqs)
	o.reqs = append(o.reqs, originReq{Range: r.Header.Get("Range"), IfRange: r.Header.Get("If-Range")})
	release, holding := o.release, o.holding
	if o.ignoreRange {
		r.Header.Del("Range")
	}
	o.mu.Unlock()

	cw := &originWriter{w: w, o: o, holdAt: holdAt, release: release, holding: holding, done: r.Context().Done(), throttle: throttle}
	defer func() {
		o.mu.Lock()
		o.reqs[i].Status = cw.status
		o.mu.Unlock()
	}()
	if code != 0 {
		cw.WriteHeader(code)
		return
	}
	if trickle {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("ETag", etag)
		cw.WriteHeader(http.StatusOK)
		for _, b := range body {
			if _, err := cw.Write([]byte{b}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
		}
		return
	}
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	http.ServeContent(cw, r, "", mod, bytes.NewReader(body))
}

// originWriter counts body bytes (it has no ReadFrom, so every byte passes Write) and
// holds the response at holdAt bytes.
type originWriter struct {
	w       http.ResponseWriter
	o       *origin
	status  int
	n       int64
	holdAt  int64
	release chan struct{}
	holding chan struct{}
	done    <-chan struct{}
	// throttle paces the body at this many bytes a second.
	throttle int64
	began    time.Time
}

func (cw *originWriter) Header() http.Header { return cw.w.Header() }

func (cw *originWriter) WriteHeader(code int) {
	if cw.status == 0 {
		cw.status = code
	}
	cw.w.WriteHeader(code)
}

func (cw *originWriter) Write(p []byte) (int, error) {
	if cw.status == 0 {
		cw.status = http.StatusOK
	}
	if cw.throttle > 0 {
		if cw.began.IsZero() {
			cw.began = time.Now()
		}
		// Wait until the bytes written so far are due at the rate.
		due := cw.began.Add(time.Duration(float64(cw.n) / float64(cw.throttle) * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			select {
			case <-time.After(wait):
			case <-cw.done:
				return 0, http.ErrAbortHandler
			}
		}
	}
	if cw.holdAt > 0 && cw.n+int64(len(p)) >= cw.holdAt {
		k := int(cw.holdAt - cw.n)
		m, err := cw.w.Write(p[:k])
		cw.n += int64(m)
		cw.o.sent.Add(int64(m))
		if err != nil {
			return m, err
		}
		cw.w.(http.Flusher).Flush()
		cw.o.mu.Lock()
		select {
		case <-cw.holding:
		default:
			close(cw.holding)
		}
		cw.o.mu.Unlock()
		cw.holdAt = 0
		select {
		case <-cw.release:
		case <-cw.done:
			return m, http.ErrAbortHandler
		}
		n, err := cw.w.Write(p[k:])
		cw.n += int64(n)
		cw.o.sent.Add(int64(n))
		return m + n, err
	}
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	cw.o.sent.Add(int64(n))
	return n, err
}

func (cw *originWriter) Flush() {
	if f, ok := cw.w.(http.Flusher); ok {
		f.Flush()
	}
}
