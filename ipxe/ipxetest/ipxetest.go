// Package ipxetest provides a loopback HTTP server that serves iPXE scripts to a test: a
// machine simulator, a chainloading client or a host's own boot logic can be pointed at
// its URL and the test sees what was asked for.
package ipxetest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
)

// Magic is the first line iPXE requires of a script.
const Magic = "#!ipxe"

// Request is one request the Server received.
type Request struct {
	Method    string
	Path      string
	Query     url.Values
	UserAgent string
}

// Server is an HTTP server on 127.0.0.1 answering each path it holds a script for with
// that script (text/plain), and any other path with 404.
type Server struct {
	// URL is the base URL, "http://127.0.0.1:PORT", without a trailing slash.
	URL string

	srv      *httptest.Server
	mu       sync.Mutex
	scripts  map[string]string
	requests []Request
}

// NewServer starts a Server serving scripts, keyed by path ("/boot.ipxe"). Every script
// must start with Magic, as iPXE refuses any other; NewServer panics otherwise, as a test
// that serves a non-script is wrong. Close it when done.
func NewServer(scripts map[string]string) *Server {
	s := &Server{scripts: map[string]string{}}
	for p, sc := range scripts {
		s.Set(p, sc)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Set serves script at path from now on (replacing what was there). It panics when script
// does not start with Magic or path does not start with "/".
func (s *Server) Set(path, script string) {
	if !strings.HasPrefix(path, "/") {
		panic(fmt.Sprintf("ipxetest: path %q does not start with /", path))
	}
	if !strings.HasPrefix(script, Magic) {
		panic(fmt.Sprintf("ipxetest: script for %s does not start with %s", path, Magic))
	}
	s.mu.Lock()
	s.scripts[path] = script
	s.mu.Unlock()
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Close shuts the server down, like [httptest.Server.Close]: it returns once every request
// has ended and no goroutine of the server is left.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), UserAgent: r.UserAgent()})
	script, ok := s.scripts[r.URL.Path]
	s.mu.Unlock()
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodGet {
		fmt.Fprint(w, script)
	}
}
