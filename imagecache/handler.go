package imagecache

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

const pathPrefix = "/cache/t/"

// parsePath splits /cache/t/TOKEN/SHA256 (lower-case hex only, nothing else).
func parsePath(p string) (tok [TokenLen / 2]byte, d Digest, ok bool) {
	rest, found := strings.CutPrefix(p, pathPrefix)
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
	switch c.checkGrant(&tok, d) {
	case verdictUnknown:
		c.refuse(w, &c.stats.refusedGrant)
		return
	case verdictExpired:
		c.refuse(w, &c.stats.refusedExpired)
		return
	case verdictOtherDigest:
		c.refuse(w, &c.stats.refusedDigest)
		return
	case verdictFenced:
		c.stats.refusedFenced.Add(1)
		w.Header().Set("Retry-After", "10")
		http.Error(w, "503 boot server inactive", http.StatusServiceUnavailable)
		return
	}

	now := c.now()
	c.mu.Lock()
	e := c.entries[d]
	if e == nil {
		c.mu.Unlock()
		c.refuse(w, &c.stats.refusedMissing)
		return
	}
	e.inUse++
	e.lastUsed = now
	persist := now.Sub(e.persisted) >= persistEvery
	if persist {
		e.persisted = now
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		e.inUse--
		c.mu.Unlock()
	}()

	path := c.path(d)
	f, err := os.Open(path)
	if err != nil {
		c.log.Warn("imagecache: a cached image cannot be opened", "sha256", d.String(), "err", err)
		if errors.Is(err, fs.ErrNotExist) {
			// Removed behind the cache's back: forget it, so that a pin pulls it again.
			c.mu.Lock()
			if c.entries[d] == e {
				c.forgetLocked(d)
			}
			c.mu.Unlock()
		}
		c.refuse(w, &c.stats.refusedMissing)
		return
	}
	defer f.Close()
	if persist {
		// The new mtime changes the file's identity: its stamp follows (a crash between
		// the two costs one hash of the image at the next start).
		if err := os.Chtimes(path, time.Time{}, now); err == nil {
			if err := c.writeStamp(d); err != nil {
				c.log.Warn("imagecache: stamp not written", "sha256", d.String(), "err", err)
			}
		}
	}
	// Ranges are merged, and too many refused, unless If-Range sends the whole file.
	if ir := r.Header.Get("If-Range"); ir == "" || ir == `"`+d.String()+`"` {
		if fi, err := f.Stat(); err == nil && !limitRanges(r, fi.Size()) {
			c.stats.refusedRanges.Add(1)
			w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(fi.Size(), 10))
			http.Error(w, "416 too many ranges", http.StatusRequestedRangeNotSatisfiable)
			return
		}
	}
	c.stats.served.Add(1)
	h := w.Header()
	h.Set("ETag", `"`+d.String()+`"`)
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Cache-Control", "private")
	cw := &countingWriter{ResponseWriter: w, n: &c.stats.servedBytes}
	http.ServeContent(cw, r, "", time.Time{}, f)
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
