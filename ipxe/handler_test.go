package ipxe_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testpeer.IgnoreForker) }

var (
	mac1  = hwid.MAC{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	mac2  = hwid.MAC{0x52, 0x54, 0x00, 0x12, 0x34, 0x57}
	uuid1 = hwid.UUID{0x4c, 0x4c, 0x45, 0x44, 0x00, 0x31, 0x10, 0x20, 0x80, 0x30, 0xb1, 0xc0, 0x4f, 0x50, 0x4e, 0x32}
	uuid2 = hwid.UUID{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x47, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00}
	t0    = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	isoA  = strings.Repeat("ab", 32)
)

// fakeHost implements every interface the handler asks, recording what it was asked.
type fakeHost struct {
	mu         sync.Mutex
	clock      *clocktest.Fake
	epoch      uint64
	active     bool
	entries    map[hwid.MAC]ipxe.Entry
	entryErr   error
	queries    []ipxe.Query
	token      string
	tokenErr   error
	tokenCalls int
	tokenGate  chan struct{} // when set, Token waits for it
	claims     []ipxe.Claims
	signErr    error
	cacheURL   string
	ready      map[string]bool
	discovered []ipxe.Discovery
}

func newFakeHost() *fakeHost {
	return &fakeHost{
		clock: clocktest.New(t0), epoch: 7, active: true,
		entries:  map[hwid.MAC]ipxe.Entry{mac1: {MAC: mac1, UUID: uuid1, Workflow: "wf_1", NotAfter: t0.Add(2 * time.Hour)}},
		token:    "bcjt_01k5w.c2VjcmV0",
		cacheURL: "http://192.0.2.1:8080/cache/t/0123456789abcdef0123456789abcdef/",
		ready:    map[string]bool{},
	}
}

func (f *fakeHost) Entry(_ context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	e, ok := f.entries[q.MAC]
	return e, ok, f.entryErr
}

func (f *fakeHost) Active() (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epoch, f.active
}

func (f *fakeHost) Token(_ context.Context, e ipxe.Entry) (string, error) {
	f.mu.Lock()
	f.tokenCalls++
	gate := f.tokenGate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tokenErr != nil {
		return "", f.tokenErr
	}
	return f.token + "-" + e.Workflow, nil
}

// Sign encodes the claims as base64url JSON, so tests can read back what was asserted.
func (f *fakeHost) Sign(_ context.Context, c ipxe.Claims) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.signErr != nil {
		return "", f.signErr
	}
	f.claims = append(f.claims, c)
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func (f *fakeHost) CacheURL(context.Context, ipxe.Entry) (string, error) { return f.cacheURL, nil }

func (f *fakeHost) ISOReady(_ context.Context, sha string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready[sha], nil
}

func (f *fakeHost) SanbootURL(_ context.Context, e ipxe.Entry) (string, error) {
	return "http://192.0.2.1:8080/cache/t/fedcba9876543210fedcba9876543210/" + e.SanbootSHA256, nil
}

func (f *fakeHost) config() ipxe.Config {
	return ipxe.Config{
		Entries: f, Fence: f, Tokens: f, Signer: f, Cache: f,
		OnDiscovered: func(d ipxe.Discovery) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.discovered = append(f.discovered, d)
		},
		Kernel:  "http://192.0.2.1:8080/ramdisk/vmlinuz",
		Initrds: []string{"http://192.0.2.1:8080/ramdisk/initrd.img"},
		Params:  []ipxe.Param{{Name: "bc.gateway", Value: "https://gw.example.net"}, {Name: "bc.joinkey", Value: "jk_1"}},
		Cmdline: "console=ttyS0,115200n8  quiet",
		Clock:   f.clock,
	}
}

func serve(t *testing.T, cfg ipxe.Config) (*ipxe.Handler, *httptest.Server) {
	t.Helper()
	h, err := ipxe.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func get(t *testing.T, srv *httptest.Server, method, path string) answer {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, body}
}

func bootPath(mac hwid.MAC, uuid hwid.UUID, ip string) string {
	q := ipxe.Query{MAC: mac, UUID: uuid}
	if ip != "" {
		q.IP = netip.MustParseAddr(ip)
	}
	return ipxe.PathBoot + "?" + q.Encode()
}

func mustRender(t *testing.T, r renderer) []byte {
	t.Helper()
	b, err := r.Render()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// scriptArgs returns the kernel command line of a boot script, or the sanboot URL.
func kernelLine(t *testing.T, body []byte) []string {
	t.Helper()
	lines, err := parseIPXE(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		for _, c := range l.Cmds {
			if c.Argv[0] == "kernel" {
				return c.Argv[2:]
			}
		}
	}
	t.Fatalf("no kernel line in\n%s", body)
	return nil
}

func decodeClaims(t *testing.T, args []string) ipxe.Claims {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, ipxe.ParamAssertion+"="); ok {
			b, err := base64.RawURLEncoding.DecodeString(v)
			if err != nil {
				t.Fatal(err)
			}
			var c ipxe.Claims
			if err := json.Unmarshal(b, &c); err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
	t.Fatalf("no %s in %q", ipxe.ParamAssertion, args)
	return ipxe.Claims{}
}

func checkScriptHeaders(t *testing.T, a answer) {
	t.Helper()
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := a.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
}

func TestChainScript(t *testing.T) {
	host := newFakeHost()
	cfg := host.config()
	cfg.Interface, cfg.VLAN = "net1", 12
	_, srv := serve(t, cfg)
	a := get(t, srv, http.MethodGet, ipxe.PathChain)
	if a.status != http.StatusOK {
		t.Fatalf("status %d", a.status)
	}
	checkScriptHeaders(t, a)
	c := ipxe.Chain{URL: ipxe.PathBoot, Interface: "net1", VLAN: 12}
	if err := chainShape(c).check(a.body); err != nil {
		t.Fatalf("%v\n%s", err, a.body)
	}
	if diff := cmp.Diff(string(mustRender(t, c)), string(a.body)); diff != "" {
		t.Errorf("chain script (-want +got):\n%s", diff)
	}
}

// TestChainScriptSyslog: with Config.Syslog the chain script first points iPXE's syslog
// console at the host's receiver; an address iPXE's setting cannot take is refused.
func TestChainScriptSyslog(t *testing.T) {
	host := newFakeHost()
	cfg := host.config()
	cfg.Syslog = netip.MustParseAddr("192.0.2.5")
	_, srv := serve(t, cfg)
	a := get(t, srv, http.MethodGet, ipxe.PathChain)
	c := ipxe.Chain{URL: ipxe.PathBoot, Syslog: cfg.Syslog}
	if err := chainShape(c).check(a.body); err != nil {
		t.Fatalf("%v\n%s", err, a.body)
	}
	if lines := strings.Split(string(a.body), "\n"); len(lines) < 3 || lines[2] != "set syslog 192.0.2.5" {
		t.Errorf("chain script does not set syslog before it chains:\n%s", a.body)
	}
	for _, bad := range []string{"2001:db8::5", "0.0.0.0", "::ffff:192.0.2.5"} {
		cfg.Syslog = netip.MustParseAddr(bad)
		if err := cfg.Validate(); !errors.Is(err, ipxe.ErrInvalid) {
			t.Errorf("Validate with Syslog %s: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestBootScript(t *testing.T) {
	placeholder := hwid.UUID{0x03, 0x00, 0x02, 0x00, 0x04, 0x00, 0x05, 0x00, 0x00, 0x06, 0x00, 0x07, 0x00, 0x08, 0x00, 0x09}
	for _, tc := range []struct {
		name        string
		uuid        hwid.UUID
		ip          string
		notAfter    time.Duration // entry's, from t0; 0: none
		noEntryUUID bool
		noCache     bool
		wantUUID    hwid.UUID
		wantIP      string
	}{
		// The assertion's UUID is the entry's when it has one (the query's is a spelling of
		// it), and its IP is the connection's (the query's, when sent, is the same).
		{"entry's uuid, connection's ip", uuid1.SMBIOS(), "127.0.0.1", 2 * time.Hour, false, false, uuid1, "127.0.0.1"},
		{"uuid from entry, ip from connection", hwid.UUID{}, "", 2 * time.Hour, false, false, uuid1, "127.0.0.1"},
		{"entry without uuid takes the query's", uuid2, "", 2 * time.Hour, true, false, uuid2, "127.0.0.1"},
		{"placeholder uuid never asserted", placeholder, "", 0, true, false, hwid.UUID{}, "127.0.0.1"},
		{"entry ends soon", uuid1, "127.0.0.1", 5 * time.Minute, false, true, uuid1, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := newFakeHost()
			e := host.entries[mac1]
			e.NotAfter = time.Time{}
			if tc.notAfter != 0 {
				e.NotAfter = t0.Add(tc.notAfter)
			}
			if tc.noEntryUUID {
				e.UUID = hwid.UUID{}
			}
			host.entries[mac1] = e
			if tc.noCache {
				host.cacheURL = ""
			}
			h, srv := serve(t, host.config())
			a := get(t, srv, http.MethodGet, bootPath(mac1, tc.uuid, tc.ip))
			if a.status != http.StatusOK {
				t.Fatalf("status %d\n%s", a.status, a.body)
			}
			checkScriptHeaders(t, a)
			args := kernelLine(t, a.body)
			claims := decodeClaims(t, args)
			want := ipxe.Boot{
				Kernel:  "http://192.0.2.1:8080/ramdisk/vmlinuz",
				Initrds: []string{"http://192.0.2.1:8080/ramdisk/initrd.img"},
				Params: []ipxe.Param{
					{Name: "bc.gateway", Value: "https://gw.example.net"}, {Name: "bc.joinkey", Value: "jk_1"},
					{Name: ipxe.ParamToken, Value: "bcjt_01k5w.c2VjcmV0-wf_1"},
					{Name: ipxe.ParamAssertion, Value: strings.TrimPrefix(args[4], ipxe.ParamAssertion+"=")},
				},
				Cmdline: []string{"console=ttyS0,115200n8", "quiet"},
				Again:   ipxe.PathChain,
			}
			if !tc.noCache {
				want.Params = append(want.Params, ipxe.Param{Name: ipxe.ParamCache, Value: host.cacheURL})
			}
			if err := bootShape(want).check(a.body); err != nil {
				t.Fatalf("%v\n%s", err, a.body)
			}
			// The not-after is the entry's: the signer (package assertion) bounds the lifetime.
			wantClaims := ipxe.Claims{
				MAC: mac1, IP: netip.MustParseAddr(tc.wantIP), UUID: tc.wantUUID, Workflow: "wf_1",
				Epoch: 7, NotAfter: e.NotAfter,
			}
			if diff := cmp.Diff(wantClaims, claims, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
			if c := h.Stats(); c.Scripts != 1 || c.TokenFetches != 1 || c.Requests != 1 {
				t.Errorf("counters %+v", c)
			}
		})
	}
}

func TestUnknownMachine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		mac      hwid.MAC
		reported bool
	}{
		// Every GET is reported; what counts is the host's rule (discovery's DHCPFirst). A
		// HEAD is refused before anything is asked (TestHeadSignsNothing).
		{"get", http.MethodGet, mac2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := newFakeHost()
			cfg := host.config()
			h, srv := serve(t, cfg)
			a := get(t, srv, tc.method, bootPath(tc.mac, uuid2, "192.0.2.77"))
			if a.status != http.StatusOK {
				t.Fatalf("status %d", a.status)
			}
			checkScriptHeaders(t, a)
			if tc.method == http.MethodGet {
				if diff := cmp.Diff(string(mustRender(t, ipxe.Exit{})), string(a.body)); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
			}
			var want []ipxe.Discovery
			if tc.reported {
				want = []ipxe.Discovery{{Query: ipxe.Query{MAC: tc.mac, UUID: uuid2, IP: netip.MustParseAddr("192.0.2.77"), Remote: netip.MustParseAddr("127.0.0.1")},
					At: t0}}
			}
			if diff := cmp.Diff(want, host.discovered, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("discovered (-want +got):\n%s", diff)
			}
			if c := h.Stats(); c.Unknown != 1 || c.Discovered != uint64(len(want)) || c.TokenFetches != 0 {
				t.Errorf("counters %+v", c)
			}
		})
	}
}

// TestMismatchGetsNoSecret: when the host says the machine does not match its entry (S3),
// the answer is the exit script, nothing is signed or fetched, nothing is reported as
// discovered, and the mismatch is counted apart from unknown machines. The host is handed
// the arch the chain script's platform and buildarch name.
func TestMismatchGetsNoSecret(t *testing.T) {
	host := newFakeHost()
	host.entryErr = fmt.Errorf("%w: arch bios, entry x86_64-efi", ipxe.ErrMismatch)
	h, srv := serve(t, host.config())
	a := get(t, srv, http.MethodGet, bootPath(mac1, uuid1, "")+"&platform=pcbios&buildarch=i386")
	if a.status != http.StatusOK {
		t.Fatalf("status %d, want 200 with the exit script\n%s", a.status, a.body)
	}
	if diff := cmp.Diff(string(mustRender(t, ipxe.Exit{})), string(a.body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	if strings.Contains(string(a.body), ipxe.ParamToken) || len(host.claims) != 0 || host.tokenCalls != 0 || len(host.discovered) != 0 {
		t.Errorf("a mismatched machine got a secret or was reported: claims %v, token calls %d, discovered %v", host.claims, host.tokenCalls, host.discovered)
	}
	if st := h.Stats(); st.Mismatched != 1 || st.Unknown != 0 || st.Errors != 0 {
		t.Errorf("stats %+v, want Mismatched 1 and nothing else", st)
	}
	want := []ipxe.Query{{MAC: mac1, UUID: uuid1, Arch: hwid.ArchBIOS, HasArch: true, Remote: netip.MustParseAddr("127.0.0.1")}}
	if diff := cmp.Diff(want, host.queries, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("queries the host saw (-want +got):\n%s", diff)
	}
}

func TestLapsedEntryIsUnknown(t *testing.T) {
	host := newFakeHost()
	host.clock.Set(t0.Add(3 * time.Hour)) // the entry ends at t0+2h
	_, srv := serve(t, host.config())
	if a := get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, "")); a.status != http.StatusOK || !strings.Contains(string(a.body), "exit 1") {
		t.Fatalf("status %d, want 200 with the exit script", a.status)
	}
	if host.tokenCalls != 0 || len(host.claims) != 0 {
		t.Errorf("a lapsed entry asked for a token (%d) or signed (%d)", host.tokenCalls, len(host.claims))
	}
}

func TestFenced(t *testing.T) {
	for _, tc := range []struct {
		name   string
		epoch  uint64
		active bool
	}{{"not active", 7, false}, {"epoch zero", 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			host := newFakeHost()
			host.epoch, host.active = tc.epoch, tc.active
			h, srv := serve(t, host.config())
			for _, m := range []hwid.MAC{mac1, mac2} {
				a := get(t, srv, http.MethodGet, bootPath(m, hwid.UUID{}, ""))
				if a.status != http.StatusServiceUnavailable {
					t.Fatalf("%s: status %d", m, a.status)
				}
				checkScriptHeaders(t, a)
				if diff := cmp.Diff(string(mustRender(t, ipxe.Fenced{})), string(a.body)); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
				if ra := a.header.Get("Retry-After"); ra != "" {
					t.Errorf("fenced answer has Retry-After %q: iPXE would keep asking a fenced agent", ra)
				}
			}
			if len(host.discovered) != 0 || host.tokenCalls != 0 || len(host.claims) != 0 {
				t.Errorf("a fenced agent reported %d, fetched %d tokens, signed %d", len(host.discovered), host.tokenCalls, len(host.claims))
			}
			if c := h.Stats(); c.Fenced != 2 {
				t.Errorf("counters %+v", c)
			}
		})
	}
}

func TestTokenReuse(t *testing.T) {
	host := newFakeHost()
	h, srv := serve(t, host.config())
	tokenOf := func() string {
		a := get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, ""))
		if a.status != http.StatusOK {
			t.Fatalf("status %d", a.status)
		}
		for _, arg := range kernelLine(t, a.body) {
			if v, ok := strings.CutPrefix(arg, ipxe.ParamToken+"="); ok {
				return v
			}
		}
		t.Fatal("no token")
		return ""
	}
	first := tokenOf()
	host.mu.Lock()
	host.token = "bcjt_changed.c2VjcmV0" // the host would now answer differently
	host.mu.Unlock()
	if again := tokenOf(); again != first {
		t.Errorf("second ask got %q, want the first token %q reused", again, first)
	}
	if host.tokenCalls != 1 {
		t.Errorf("host asked %d times, want 1", host.tokenCalls)
	}
	// A new entry (another workflow) is a new token.
	host.mu.Lock()
	e := host.entries[mac1]
	e.Workflow = "wf_2"
	host.entries[mac1] = e
	host.mu.Unlock()
	if got := tokenOf(); got != "bcjt_changed.c2VjcmV0-wf_2" {
		t.Errorf("new workflow got token %q", got)
	}
	if host.tokenCalls != 2 {
		t.Errorf("host asked %d times, want 2", host.tokenCalls)
	}
	// Each script still carries its own fresh assertion.
	if len(host.claims) != 3 {
		t.Errorf("%d assertions signed, want 3", len(host.claims))
	}
	if c := h.Stats(); c.TokenFetches != 2 || c.Scripts != 3 {
		t.Errorf("counters %+v", c)
	}
}

func TestTokenAskedOnceUnderConcurrency(t *testing.T) {
	host := newFakeHost()
	host.tokenGate = make(chan struct{})
	_, srv := serve(t, host.config())
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Go(func() { statuses[i] = get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, "")).status })
	}
	// Let the requests pile up on the first ask, then answer it.
	for deadline := time.Now().Add(5 * time.Second); ; {
		host.mu.Lock()
		n := host.tokenCalls
		host.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(host.tokenGate)
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("request %d: status %d", i, s)
		}
	}
	if host.tokenCalls < 1 || host.tokenCalls > 8 {
		t.Fatalf("tokenCalls %d", host.tokenCalls)
	}
	// Every request that arrived while the first ask was pending shared it; any later one
	// found the cached token. Either way, one ask per entry once it has answered:
	before := host.tokenCalls
	get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, ""))
	if host.tokenCalls != before {
		t.Errorf("asked again after the token was cached")
	}
}

func TestTokenNotReady(t *testing.T) {
	host := newFakeHost()
	host.tokenErr = fmt.Errorf("secret request pending: %w", ipxe.ErrNotReady)
	h, srv := serve(t, host.config())
	a := get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, ""))
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("status %d", a.status)
	}
	checkScriptHeaders(t, a)
	if got := a.header.Get("Retry-After"); got != "5" {
		t.Errorf("Retry-After %q, want 5", got)
	}
	w := ipxe.Wait{Delay: ipxe.DefaultTokenWait, URL: ipxe.PathChain}
	if diff := cmp.Diff(string(mustRender(t, w)), string(a.body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	if len(host.claims) != 0 {
		t.Error("signed an assertion for a script without a token")
	}
	host.mu.Lock()
	host.tokenErr = nil
	host.mu.Unlock()
	if a := get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, "")); a.status != http.StatusOK {
		t.Fatalf("once ready: status %d", a.status)
	}
	if c := h.Stats(); c.TokenWaits != 1 || c.TokenFetches != 2 || c.Scripts != 1 {
		t.Errorf("counters %+v", c)
	}
}

func TestSanboot(t *testing.T) {
	host := newFakeHost()
	host.entries[mac1] = ipxe.Entry{MAC: mac1, Workflow: "wf_iso", NotAfter: t0.Add(time.Hour), SanbootSHA256: isoA}
	h, srv := serve(t, host.config())

	// Not pinned or not cached: wait, never the ramdisk.
	a := get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, ""))
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("status %d", a.status)
	}
	if got := a.header.Get("Retry-After"); got != "30" {
		t.Errorf("Retry-After %q, want 30", got)
	}
	w := ipxe.Wait{Delay: 30 * time.Second, URL: ipxe.PathChain}
	if diff := cmp.Diff(string(mustRender(t, w)), string(a.body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}

	host.mu.Lock()
	host.ready[isoA] = true
	host.mu.Unlock()
	a = get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, ""))
	if a.status != http.StatusOK {
		t.Fatalf("status %d", a.status)
	}
	s := ipxe.Sanboot{URL: "http://192.0.2.1:8080/cache/t/fedcba9876543210fedcba9876543210/" + isoA, Again: ipxe.PathChain}
	if err := sanbootShape(s).check(a.body); err != nil {
		t.Fatalf("%v\n%s", err, a.body)
	}
	if host.tokenCalls != 0 || len(host.claims) != 0 || strings.Contains(string(a.body), "bc.") {
		t.Errorf("a sanboot used a token (%d) or assertion (%d) or bc.* parameter", host.tokenCalls, len(host.claims))
	}
	if c := h.Stats(); c.SanbootWaits != 1 || c.Sanboots != 1 {
		t.Errorf("counters %+v", c)
	}

	// Without a cache at all, the ISO can never be ready: the machine waits.
	cfg := host.config()
	cfg.Cache = nil
	_, srv2 := serve(t, cfg)
	if a := get(t, srv2, http.MethodGet, bootPath(mac1, hwid.UUID{}, "")); a.status != http.StatusServiceUnavailable {
		t.Errorf("no cache: status %d", a.status)
	}
}

func TestHostFailures(t *testing.T) {
	boom := errors.New("store unreachable")
	for _, tc := range []struct {
		name   string
		break_ func(*fakeHost)
	}{
		{"entry", func(f *fakeHost) { f.entryErr = boom }},
		{"token", func(f *fakeHost) { f.tokenErr = boom }},
		{"sign", func(f *fakeHost) { f.signErr = boom }},
		{"unsafe token", func(f *fakeHost) { f.token = "x ${evil}" }},
		{"bad digest", func(f *fakeHost) {
			f.entries[mac1] = ipxe.Entry{MAC: mac1, SanbootSHA256: "../../etc/passwd"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := newFakeHost()
			tc.break_(host)
			h, srv := serve(t, host.config())
			a := get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, ""))
			if a.status != http.StatusInternalServerError {
				t.Fatalf("status %d", a.status)
			}
			checkScriptHeaders(t, a)
			if strings.Contains(string(a.body), "store unreachable") || strings.Contains(string(a.body), "evil") {
				t.Errorf("error detail on the wire:\n%s", a.body)
			}
			if a.header.Get("Retry-After") == "" {
				t.Error("no Retry-After: the machine would give up")
			}
			if c := h.Stats(); c.Errors != 1 || c.Scripts != 0 {
				t.Errorf("counters %+v", c)
			}
		})
	}
}

func TestBadQueries(t *testing.T) {
	host := newFakeHost()
	h, srv := serve(t, host.config())
	for _, q := range []string{
		"", "?mac=", "?mac=zz:zz:zz:zz:zz:zz", "?mac=52:54:00:12:34:56&mac=52:54:00:12:34:57",
		"?mac=52:54:00:12:34:56&uuid=nope", "?mac=52:54:00:12:34:56&ip=300.1.1.1",
		"?mac=52:54:00:12:34:56&ip=0.0.0.0", "?mac=ff:ff:ff:ff:ff:ff", "?mac=52:54:00:12:34:56;x",
		"?mac=52%3A54%3A00%3A12%3A34%3A56%0A", "?mac=52:54:00:12:34:56&x=" + strings.Repeat("a", 600),
	} {
		a := get(t, srv, http.MethodGet, ipxe.PathBoot+q)
		if a.status != http.StatusOK || !strings.Contains(string(a.body), "exit 1") {
			t.Errorf("%q: status %d", q, a.status)
		}
	}
	if c := h.Stats(); c.BadRequests != 11 || len(host.discovered) != 0 {
		t.Errorf("counters %+v, discovered %d", c, len(host.discovered))
	}
}

func TestMethods(t *testing.T) {
	_, srv := serve(t, newFakeHost().config())
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		for _, p := range []string{ipxe.PathChain, bootPath(mac1, hwid.UUID{}, ""), ipxe.PathFiles + "ipxe.efi"} {
			a := get(t, srv, m, p)
			allow := "GET, HEAD"
			if strings.HasPrefix(p, ipxe.PathBoot+"?") {
				allow = "GET" // a HEAD would sign nothing: TestHeadSignsNothing
			}
			if a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != allow {
				t.Errorf("%s %s: status %d, Allow %q", m, p, a.status, a.header.Get("Allow"))
			}
			if a.header.Get("Content-Type") == "" {
				t.Errorf("%s %s: no Content-Type", m, p)
			}
		}
	}
}

// rawRequest sends exactly the given header bytes and returns the status code.
func rawRequest(t *testing.T, addr string, head string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// headOfSize builds a GET of chain.ipxe whose request line and header fields, with the
// blank line, are exactly n bytes.
func headOfSize(n int) string {
	base := "GET " + ipxe.PathChain + " HTTP/1.1\r\nHost: 192.0.2.1\r\nX-Pad: \r\n\r\n"
	return strings.Replace(base, "X-Pad: ", "X-Pad: "+strings.Repeat("p", n-len(base)), 1)
}

func TestHeaderCap(t *testing.T) {
	h, err := ipxe.NewHandler(newFakeHost().config())
	if err != nil {
		t.Fatal(err)
	}
	plainSrv := httptest.NewServer(h)
	defer plainSrv.Close()
	wrapped := httptest.NewUnstartedServer(nil)
	wrapped.Config = ipxe.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
	}))
	wrapped.Start()
	defer wrapped.Close()

	for _, tc := range []struct {
		name string
		addr string
		size int
		want int
	}{
		{"handler at the cap", plainSrv.Listener.Addr().String(), ipxe.MaxHeaderBytes, http.StatusOK},
		{"handler one over", plainSrv.Listener.Addr().String(), ipxe.MaxHeaderBytes + 1, http.StatusRequestHeaderFieldsTooLarge},
		{"handler far over", plainSrv.Listener.Addr().String(), 64 << 10, http.StatusRequestHeaderFieldsTooLarge},
		{"server at the cap", wrapped.Listener.Addr().String(), ipxe.MaxHeaderBytes, http.StatusOK},
		{"server one over", wrapped.Listener.Addr().String(), ipxe.MaxHeaderBytes + 1, http.StatusRequestHeaderFieldsTooLarge},
		{"server far over", wrapped.Listener.Addr().String(), 64 << 10, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rawRequest(t, tc.addr, headOfSize(tc.size)); got != tc.want {
				t.Errorf("%d header bytes: status %d, want %d", tc.size, got, tc.want)
			}
		})
	}
	if c := h.Stats(); c.HeadersTooLarge != 2 {
		t.Errorf("HeadersTooLarge %d, want 2", c.HeadersTooLarge)
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	efi := []byte(strings.Repeat("MZ-ipxe-efi-", 1000))
	if err := os.WriteFile(filepath.Join(dir, "ipxe.efi"), efi, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".hidden"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "escape.efi")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	cfg := newFakeHost().config()
	cfg.Files = root.FS()
	_, srv := serve(t, cfg)

	a := get(t, srv, http.MethodGet, ipxe.PathFiles+"ipxe.efi")
	if a.status != http.StatusOK || string(a.body) != string(efi) {
		t.Fatalf("GET: status %d, %d bytes", a.status, len(a.body))
	}
	if ct := a.header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	a = get(t, srv, http.MethodHead, ipxe.PathFiles+"ipxe.efi")
	if a.status != http.StatusOK || a.header.Get("Content-Length") != fmt.Sprint(len(efi)) || len(a.body) != 0 {
		t.Errorf("HEAD: status %d, length %q, body %d", a.status, a.header.Get("Content-Length"), len(a.body))
	}
	// A range, as UEFI HTTP boot and iPXE ask; and a Host without a port.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+ipxe.PathFiles+"ipxe.efi", nil)
	req.Host = "192.0.2.1"
	req.Header.Set("Range", "bytes=12-23")
	req.Header.Set("User-Agent", "UefiHttpBoot/1.0")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || string(part) != string(efi[12:24]) {
		t.Errorf("range: status %d, %q", resp.StatusCode, part)
	}
	for _, p := range []string{"escape.efi", ".hidden", "sub", "sub/x", "../secret", "%2e%2e/secret", "%2Fetc%2Fpasswd", "", "missing.efi", "a%00b"} {
		if a := get(t, srv, http.MethodGet, ipxe.PathFiles+p); a.status != http.StatusNotFound || strings.Contains(string(a.body), "secret") {
			t.Errorf("%q: status %d", p, a.status)
		}
	}
	if a := get(t, srv, http.MethodGet, "/boot/other"); a.status != http.StatusNotFound {
		t.Errorf("/boot/other: status %d", a.status)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*ipxe.Config)
		is     error
	}{
		{"no entries", func(c *ipxe.Config) { c.Entries = nil }, ipxe.ErrInvalid},
		{"no signer", func(c *ipxe.Config) { c.Signer = nil }, ipxe.ErrInvalid},
		{"param not bc.", func(c *ipxe.Config) { c.Params = []ipxe.Param{{Name: "gateway", Value: "x"}} }, ipxe.ErrInvalid},
		{"param the handler sets", func(c *ipxe.Config) { c.Params = []ipxe.Param{{Name: ipxe.ParamToken, Value: "x"}} }, ipxe.ErrInvalid},
		{"param name unsafe", func(c *ipxe.Config) { c.Params = []ipxe.Param{{Name: "bc.x\nreboot", Value: "x"}} }, ipxe.ErrUnsafe},
		{"cmdline overrides a bc. param", func(c *ipxe.Config) { c.Cmdline = "quiet bc.token=stolen" }, ipxe.ErrInvalid},
		{"cmdline expansion", func(c *ipxe.Config) { c.Cmdline = "root=${root}" }, ipxe.ErrUnsafe},
		{"kernel", func(c *ipxe.Config) { c.Kernel = "http://h/vmlinuz x=1" }, ipxe.ErrUnsafe},
		{"base url path", func(c *ipxe.Config) { c.BaseURL = "http://192.0.2.1/x" }, ipxe.ErrInvalid},
		{"vlan", func(c *ipxe.Config) { c.VLAN = 5000 }, ipxe.ErrInvalid},
		{"retry", func(c *ipxe.Config) { c.Retry.Attempts = 99 }, ipxe.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newFakeHost().config()
			tc.mutate(&cfg)
			if _, err := ipxe.NewHandler(cfg); !errors.Is(err, tc.is) {
				t.Errorf("error %v, want %v", err, tc.is)
			}
		})
	}
}

func TestBaseURL(t *testing.T) {
	host := newFakeHost()
	cfg := host.config()
	cfg.BaseURL = "http://192.0.2.1:8080/"
	_, srv := serve(t, cfg)
	a := get(t, srv, http.MethodGet, ipxe.PathChain)
	if err := chainShape(ipxe.Chain{URL: "http://192.0.2.1:8080/boot/ipxe"}).check(a.body); err != nil {
		t.Errorf("%v\n%s", err, a.body)
	}
	a = get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, ""))
	if !strings.Contains(string(a.body), "chain --replace --autofree http://192.0.2.1:8080/boot/chain.ipxe ") {
		t.Errorf("fallback is not absolute:\n%s", a.body)
	}
}

func TestTokenCacheBound(t *testing.T) {
	host := newFakeHost()
	macs := []hwid.MAC{mac1, mac2, {0x52, 0x54, 0x00, 0, 0, 3}}
	for i, m := range macs {
		host.entries[m] = ipxe.Entry{MAC: m, Workflow: "wf", NotAfter: t0.Add(time.Duration(i+1) * time.Hour)}
	}
	cfg := host.config()
	cfg.MaxTokens = 2
	_, srv := serve(t, cfg)
	for _, m := range macs {
		get(t, srv, http.MethodGet, bootPath(m, hwid.UUID{}, ""))
	}
	// mac1's entry ends first, so it was dropped to make room; the other two are kept.
	for _, m := range macs[1:] {
		get(t, srv, http.MethodGet, bootPath(m, hwid.UUID{}, ""))
	}
	if host.tokenCalls != 3 {
		t.Errorf("tokenCalls %d, want 3 (kept tokens reused)", host.tokenCalls)
	}
	get(t, srv, http.MethodGet, bootPath(mac1, hwid.UUID{}, ""))
	if host.tokenCalls != 4 {
		t.Errorf("tokenCalls %d, want 4 (the dropped one asked again)", host.tokenCalls)
	}
}

// noSeekFS hides Seek, as an fs.FS over a stream would.
type noSeekFS struct{ fs.FS }
type noSeekFile struct{ f fs.File }

func (n noSeekFS) Open(name string) (fs.File, error) {
	f, err := n.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return noSeekFile{f}, nil
}
func (n noSeekFile) Stat() (fs.FileInfo, error) { return n.f.Stat() }
func (n noSeekFile) Read(b []byte) (int, error) { return n.f.Read(b) }
func (n noSeekFile) Close() error               { return n.f.Close() }

func TestFilesWithoutSeek(t *testing.T) {
	data := []byte(strings.Repeat("undionly", 500))
	cfg := newFakeHost().config()
	cfg.Files = noSeekFS{fstest.MapFS{"undionly.kpxe": {Data: data}}}
	_, srv := serve(t, cfg)
	a := get(t, srv, http.MethodGet, ipxe.PathFiles+"undionly.kpxe")
	if a.status != http.StatusOK || string(a.body) != string(data) || a.header.Get("Content-Length") != fmt.Sprint(len(data)) {
		t.Errorf("status %d, %d bytes, length %q", a.status, len(a.body), a.header.Get("Content-Length"))
	}
	a = get(t, srv, http.MethodHead, ipxe.PathFiles+"undionly.kpxe")
	if a.status != http.StatusOK || len(a.body) != 0 {
		t.Errorf("HEAD: status %d, %d bytes", a.status, len(a.body))
	}
}

// TestQueryIP: ip= is the machine's unicast address, unmapped; "::" (iPXE 2's ${netX/ip6}
// when it has no IPv6 address of its own) is no address, as an empty one is, while
// 0.0.0.0, a multicast address or one with a zone is refused.
func TestQueryIP(t *testing.T) {
	for _, tc := range []struct {
		ip   string
		want netip.Addr
		bad  bool
	}{
		{"192.0.2.7", netip.MustParseAddr("192.0.2.7"), false},
		{"2001:db8::148", netip.MustParseAddr("2001:db8::148"), false},
		{"::ffff:192.0.2.7", netip.MustParseAddr("192.0.2.7"), false},
		{"", netip.Addr{}, false},
		{"::", netip.Addr{}, false},
		{"0:0::0", netip.Addr{}, false},
		{"0.0.0.0", netip.Addr{}, true},
		{"::ffff:0.0.0.0", netip.Addr{}, true},
		{"ff02::1", netip.Addr{}, true},
		{"fe80::1%25eth0", netip.Addr{}, true},
	} {
		q, err := ipxe.ParseQuery("mac=52:54:00:12:34:56&ip=" + tc.ip)
		var qe *ipxe.QueryError
		switch {
		case tc.bad && (!errors.As(err, &qe) || qe.Field != "ip"):
			t.Errorf("ip=%s: error %v, want a *QueryError for ip", tc.ip, err)
		case !tc.bad && err != nil:
			t.Errorf("ip=%s: %v", tc.ip, err)
		case !tc.bad && q.IP != tc.want:
			t.Errorf("ip=%s: IP %v, want %v", tc.ip, q.IP, tc.want)
		}
	}
}

// TestQueryArch: the chain script's ${platform} and ${buildarch} become the option 93 arch
// the host compares with the entry's; an unknown pair is no arch, a malformed one refused.
func TestQueryArch(t *testing.T) {
	for _, tc := range []struct {
		query   string
		arch    hwid.Arch
		hasArch bool
		field   string // QueryError field; "" for none
	}{
		{"platform=pcbios&buildarch=i386", hwid.ArchBIOS, true, ""},
		{"platform=pcbios&buildarch=x86_64", hwid.ArchBIOS, true, ""},
		{"platform=efi&buildarch=x86_64", hwid.ArchX86_64EFI, true, ""},
		{"platform=efi&buildarch=arm64", hwid.ArchARM64EFI, true, ""},
		{"platform=efi&buildarch=i386", hwid.ArchIA32EFI, true, ""},
		{"platform=&buildarch=", 0, false, ""}, // an iPXE without the settings
		{"platform=efi&buildarch=mips", 0, false, ""},
		{"platform=efi", 0, false, ""},
		{"platform=EFI&buildarch=x86_64", 0, false, "platform"},
		{"platform=efi&buildarch=x86%2064", 0, false, "buildarch"},
		{"platform=efi&platform=pcbios", 0, false, "platform"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, err := ipxe.ParseQuery("mac=52:54:00:12:34:56&" + tc.query)
			var qe *ipxe.QueryError
			switch {
			case tc.field != "":
				if !errors.As(err, &qe) || qe.Field != tc.field {
					t.Fatalf("error %v, want a *QueryError for %s", err, tc.field)
				}
			case err != nil:
				t.Fatal(err)
			case q.Arch != tc.arch || q.HasArch != tc.hasArch:
				t.Errorf("arch %v (%v), want %v (%v)", q.Arch, q.HasArch, tc.arch, tc.hasArch)
			}
		})
	}
}
