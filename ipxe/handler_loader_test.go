package ipxe_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/ipxe"
)

// recordingLoader spells every answer as JSON, so a test reads back what the handler decided,
// and says 200 for the answers a loader without statuses must run (fenced, wait).
type recordingLoader struct {
	mu      sync.Mutex
	answers []ipxe.Answer
	fail    ipxe.AnswerKind // Render fails for this kind
}

func (l *recordingLoader) render(a ipxe.Answer) (int, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.Kind == l.fail {
		return 0, nil, errors.New("cannot spell it")
	}
	l.answers = append(l.answers, a)
	status := a.Status
	if a.Kind == ipxe.AnswerFenced || a.Kind == ipxe.AnswerWait {
		status = http.StatusOK
	}
	b, err := json.Marshal(a)
	return status, b, err
}

func (l *recordingLoader) last(t *testing.T) ipxe.Answer {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.answers) == 0 {
		t.Fatal("the loader rendered nothing")
	}
	return l.answers[len(l.answers)-1]
}

const loaderPath = "/boot/grub.cfg"

func loaderConfig(f *fakeHost, l *recordingLoader) ipxe.Config {
	cfg := f.config()
	cfg.Kernel = ipxe.CacheImage(strings.Repeat("aa", 32))
	cfg.Initrds = []string{ipxe.CacheImage(strings.Repeat("bb", 32))}
	cfg.Loaders = []ipxe.Loader{{Name: "grub", Path: loaderPath, Render: l.render}}
	return cfg
}

// TestLoaderSameDecision: a loader's path gets the decision /boot/ipxe makes, in the loader's
// words: the boot answer with the same kernel command line values (the token, a fresh
// assertion, the cache grant) and the kernel and initrd under that grant; the host's Entries
// is told which loader asks; exit for an unknown machine (discovered), a mismatch, an
// unbound requester and a query IP that is not the connection's; fenced while fenced; a wait
// while the token is not ready; 405 for HEAD, which signs nothing.
func TestLoaderSameDecision(t *testing.T) {
	f := newFakeHost()
	l := &recordingLoader{}
	h, srv := serve(t, loaderConfig(f, l))
	q := ipxe.Query{MAC: mac1, UUID: uuid1, Nonce: "key_1"}
	path := loaderPath + "?" + q.Encode()

	a := get(t, srv, http.MethodGet, path)
	if a.status != http.StatusOK {
		t.Fatalf("boot: status %d\n%s", a.status, a.body)
	}
	got := l.last(t)
	cache := f.cacheURL
	want := ipxe.Answer{
		Kind: ipxe.AnswerBoot, Status: http.StatusOK,
		Query:   ipxe.Query{MAC: mac1, UUID: uuid1, Nonce: "key_1", Remote: got.Query.Remote, Loader: "grub"},
		Kernel:  cache + strings.Repeat("aa", 32),
		Initrds: []string{cache + strings.Repeat("bb", 32)},
		Params: []ipxe.Param{
			{Name: "bc.gateway", Value: "https://gw.example.net"}, {Name: "bc.joinkey", Value: "jk_1"},
			{Name: ipxe.ParamToken, Value: "bcjt_01k5w.c2VjcmV0-wf_1"},
			{Name: ipxe.ParamAssertion, Value: got.Params[3].Value},
			{Name: ipxe.ParamCache, Value: cache},
		},
		Cmdline: []string{"console=ttyS0,115200n8", "quiet"},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("boot answer (-want +got):\n%s", diff)
	}
	if !got.Query.Remote.IsLoopback() {
		t.Errorf("Query.Remote = %v, want the connection's address", got.Query.Remote)
	}
	f.mu.Lock()
	if n := len(f.queries); n == 0 || f.queries[n-1].Loader != "grub" {
		t.Errorf("the host's Entries was not told the loader: %+v", f.queries)
	}
	if len(f.claims) != 1 || f.claims[0].MAC != mac1 || f.claims[0].UUID != uuid1 {
		t.Errorf("claims %+v, want one assertion for the machine", f.claims)
	}
	f.mu.Unlock()

	for _, tc := range []struct {
		name   string
		setup  func()
		path   string
		status int
		kind   ipxe.AnswerKind
		delay  time.Duration
	}{
		{"unknown machine", func() {}, loaderPath + "?mac=" + mac2.String(), http.StatusNotFound, ipxe.AnswerExit, 0},
		{"mismatch", func() { f.entryErr = fmt.Errorf("%w: arch", ipxe.ErrMismatch) }, path, http.StatusNotFound, ipxe.AnswerExit, 0},
		{"unbound", func() { f.entryErr = fmt.Errorf("%w: no key", ipxe.ErrUnbound) }, path, http.StatusNotFound, ipxe.AnswerExit, 0},
		{"query ip", func() {}, path + "&ip=192.0.2.77", http.StatusNotFound, ipxe.AnswerExit, 0},
		{"bad query", func() {}, loaderPath + "?mac=zz", http.StatusBadRequest, ipxe.AnswerExit, 0},
		{"fenced", func() { f.active = false }, path, http.StatusOK, ipxe.AnswerFenced, ipxe.DefaultFencedDelay},
		{"token not ready", func() {
			f.tokenErr = ipxe.ErrNotReady
			f.entries[mac1] = ipxe.Entry{MAC: mac1, Workflow: "wf_2", NotAfter: t0.Add(time.Hour)}
		},
			path, http.StatusOK, ipxe.AnswerWait, ipxe.DefaultTokenWait},
		{"host error", func() { f.entryErr = errors.New("store down") }, path, http.StatusOK, ipxe.AnswerWait, ipxe.DefaultTokenWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.mu.Lock()
			f.entryErr, f.active, f.tokenErr = nil, true, nil
			f.entries[mac1] = ipxe.Entry{MAC: mac1, UUID: uuid1, Workflow: "wf_1", NotAfter: t0.Add(2 * time.Hour)}
			tc.setup()
			signed := len(f.claims)
			f.mu.Unlock()
			a := get(t, srv, http.MethodGet, tc.path)
			got := l.last(t)
			if a.status != tc.status || got.Kind != tc.kind || got.Delay != tc.delay {
				t.Errorf("status %d, %s answer after %v; want %d, %s after %v", a.status, got.Kind, got.Delay, tc.status, tc.kind, tc.delay)
			}
			if got.Query.Loader != "grub" {
				t.Errorf("answer's Query.Loader = %q", got.Query.Loader)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.claims) != signed {
				t.Errorf("an assertion was signed for a %s answer", got.Kind)
			}
		})
	}
	if a := get(t, srv, http.MethodHead, path); a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "GET" {
		t.Errorf("HEAD: status %d, Allow %q; want 405, GET", a.status, a.header.Get("Allow"))
	}
	st := h.Stats()
	if st.Scripts != 1 || st.Unknown != 1 || st.Mismatched != 1 || st.Unbound != 1 || st.IPRefused != 1 || st.Fenced != 1 || st.TokenWaits != 1 {
		t.Errorf("stats %+v: want each answer counted as /boot/ipxe counts it", st)
	}
	// /boot/ipxe itself is still iPXE's.
	f.mu.Lock()
	f.entryErr, f.active, f.tokenErr = nil, true, nil
	f.mu.Unlock()
	if a := get(t, srv, http.MethodGet, bootPath(mac1, uuid1, "")); a.status != http.StatusOK || !strings.HasPrefix(string(a.body), "#!ipxe") {
		t.Errorf("/boot/ipxe: status %d\n%s", a.status, a.body)
	}
}

// TestLoaderSanbootRefused: a sanboot entry is iPXE's only; a loader gets a wait answer and
// no secret.
func TestLoaderSanbootRefused(t *testing.T) {
	f := newFakeHost()
	f.entries[mac1] = ipxe.Entry{MAC: mac1, Workflow: "wf_1", NotAfter: t0.Add(time.Hour), SanbootSHA256: isoA}
	l := &recordingLoader{}
	_, srv := serve(t, loaderConfig(f, l))
	a := get(t, srv, http.MethodGet, loaderPath+"?mac="+mac1.String())
	if got := l.last(t); a.status != http.StatusOK || got.Kind != ipxe.AnswerWait || got.Status != http.StatusInternalServerError {
		t.Errorf("status %d, %+v; want the wait answer for a server error", a.status, got)
	}
}

// TestLoaderRenderFails: a loader that cannot spell an answer makes the handler answer 500 in
// plain text, counted as an error; it never falls back to the iPXE script.
func TestLoaderRenderFails(t *testing.T) {
	f := newFakeHost()
	l := &recordingLoader{}
	h, srv := serve(t, loaderConfig(f, l))
	l.fail = ipxe.AnswerExit
	a := get(t, srv, http.MethodGet, loaderPath+"?mac="+mac2.String())
	if a.status != http.StatusInternalServerError || strings.Contains(string(a.body), "ipxe") {
		t.Errorf("status %d\n%s", a.status, a.body)
	}
	if h.Stats().Errors != 1 {
		t.Errorf("errors = %d", h.Stats().Errors)
	}
}

// TestLoaderValidation: a loader is refused at NewHandler when its name or path collides or
// is malformed, when it has no Render, or when the dry run finds an answer it cannot spell.
func TestLoaderValidation(t *testing.T) {
	ok := func(ipxe.Answer) (int, []byte, error) { return 200, nil, nil }
	for _, tc := range []struct {
		name    string
		loaders []ipxe.Loader
	}{
		{"bad name", []ipxe.Loader{{Name: "GRUB", Path: "/boot/grub.cfg", Render: ok}}},
		{"the script's path", []ipxe.Loader{{Name: "grub", Path: ipxe.PathBoot, Render: ok}}},
		{"under files", []ipxe.Loader{{Name: "grub", Path: ipxe.PathFiles + "grub.cfg", Render: ok}}},
		{"outside /boot/", []ipxe.Loader{{Name: "grub", Path: "/grub.cfg", Render: ok}}},
		{"twice", []ipxe.Loader{{Name: "grub", Path: "/boot/a", Render: ok}, {Name: "grub", Path: "/boot/b", Render: ok}}},
		{"no render", []ipxe.Loader{{Name: "grub", Path: "/boot/grub.cfg"}}},
		{"cannot spell the fenced answer", []ipxe.Loader{{Name: "grub", Path: "/boot/grub.cfg", Render: func(a ipxe.Answer) (int, []byte, error) {
			if a.Kind == ipxe.AnswerFenced {
				return 0, nil, errors.New("no")
			}
			return 200, nil, nil
		}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newFakeHost().config()
			cfg.Loaders = tc.loaders
			if _, err := ipxe.NewHandler(cfg); err == nil {
				t.Error("NewHandler accepted it")
			}
		})
	}
}
