package imagecache

import (
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
)

// mount is where ServeHTTP is mounted; below it are the names GrantFS opens.
const mount = "/cache/"

// parsePath splits /cache/t/TOKEN/SHA256 (lower-case hex only, nothing else).
func parsePath(p string) (tok [TokenLen / 2]byte, d Digest, ok bool) {
	rest, found := strings.CutPrefix(p, mount)
	if !found {
		return tok, d, false
	}
	return parseName(rest)
}

// parseName splits t/TOKEN/SHA256 (lower-case hex only, nothing else).
func parseName(name string) (tok [TokenLen / 2]byte, d Digest, ok bool) {
	rest, found := strings.CutPrefix(name, "t/")
	if !found || len(rest) != TokenLen+1+64 || rest[TokenLen] != '/' {
		return tok, d, false
	}
	if !parseLowerHex(tok[:], rest[:TokenLen]) || !parseLowerHex(d[:], rest[TokenLen+1:]) {
		return tok, d, false
	}
	return tok, d, true
}

// persistEvery bounds how often serving an image rewrites its mtime, which keeps the
// last-used order across restarts.
const persistEvery = time.Minute

// ServeHTTP serves GET and HEAD /cache/t/GRANT/SHA256, with ranges, ETag (the digest) and
// sendfile. Anything else, an unknown or expired grant, a grant for another digest, and an
// image not cached all answer the same 404; a boot grant while the fence is inactive
// answers 503. Mount it at "/cache/" (it reads the whole path).
func (c *Cache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		c.refuse(w, &c.stats.refusedPath)
		return
	}
	tok, d, ok := parsePath(r.URL.Path)
	if !ok {
		c.refuse(w, &c.stats.refusedPath)
		return
	}
	start := time.Now()
	f, err := c.openGranted(&tok, d)
	if c.cfg.Events != nil && err != nil {
		c.cfg.Events.Emit(cacheEvent(r, d, bootevents.OutcomeRefused, ReasonOf(err), 0, 0))
	}
	if errors.Is(err, ErrFenced) {
		w.Header().Set("Retry-After", "10")
		http.Error(w, "503 boot server inactive", http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		http.NotFound(w, nil)
		return
	}
	defer f.Close()
	// Ranges are merged, and too many refused, unless If-Range sends the whole file.
	if ir := r.Header.Get("If-Range"); ir == "" || ir == `"`+d.String()+`"` {
		if !limitRanges(r, f.Size()) {
			c.stats.refusedRanges.Add(1)
			c.stats.served.Add(-1) // openGranted counted it as served
			w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(f.Size(), 10))
			http.Error(w, "416 too many ranges", http.StatusRequestedRangeNotSatisfiable)
			return
		}
	}
	h := w.Header()
	h.Set("ETag", `"`+d.String()+`"`)
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Cache-Control", "private")
	cw := &countingWriter{ResponseWriter: w, n: &c.stats.servedBytes}
	if c.cfg.Events == nil {
		http.ServeContent(cw, r, "", time.Time{}, f.f) // the *os.File itself, for sendfile
		return
	}
	var sent atomic.Int64
	cw.n = bothCounters{&c.stats.servedBytes, &sent}
	http.ServeContent(cw, r, "", time.Time{}, f.f)
	c.cfg.Events.Emit(cacheEvent(r, d, bootevents.OutcomeOK, "served", uint64(sent.Load()), time.Since(start)))
}

// bothCounters adds to two counters.
type bothCounters [2]interface{ Add(int64) int64 }

func (b bothCounters) Add(n int64) int64 { b[1].Add(n); return b[0].Add(n) }

// cacheEvent is the boot event of a request for image d: the requester's address, the
// digest's first 12 digits (the token never).
func cacheEvent(r *http.Request, d Digest, o bootevents.Outcome, reason string, bytes uint64, took time.Duration) bootevents.Event {
	peer, _ := netip.ParseAddrPort(r.RemoteAddr)
	e := bootevents.Event{Stage: bootevents.StageCache, Outcome: o, Reason: reason, Peer: peer, Bytes: bytes, Duration: took}
	if s := d.String(); len(s) >= 12 {
		e.Detail = "sha256:" + s[:12]
	}
	return e
}

func (c *Cache) refuse(w http.ResponseWriter, counter interface{ Add(int64) int64 }) {
	counter.Add(1)
	http.NotFound(w, nil)
}

// countingWriter counts body bytes and keeps the ResponseWriter's ReadFrom, so that
// http.ServeContent still reaches sendfile.
type countingWriter struct {
	http.ResponseWriter
	n interface{ Add(int64) int64 }
}

func (w *countingWriter) Write(p []byte) (int, error) {
	k, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(k))
	return k, err
}

func (w *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		k, err := rf.ReadFrom(r)
		w.n.Add(k)
		return k, err
	}
	k, err := io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
	w.n.Add(k)
	return k, err
}

func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
