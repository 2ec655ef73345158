package ipxe_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
)

// decideCase is one machine's situation, set up on a fresh host.
type decideCase struct {
	name   string
	setup  func(*fakeHost)
	query  ipxe.Query // Remote is set to the test client's address
	kind   ipxe.AnswerKind
	status int
	reason string
}

var local = netip.MustParseAddr("127.0.0.1") // where httptest's client connects from

func decideCases() []decideCase {
	none := func(*fakeHost) {}
	sanboot := func(ready bool) func(*fakeHost) {
		return func(f *fakeHost) {
			f.entries[mac1] = ipxe.Entry{MAC: mac1, Workflow: "wf_iso", NotAfter: t0.Add(time.Hour), SanbootSHA256: isoA}
			f.ready[isoA] = ready
		}
	}
	q := ipxe.Query{MAC: mac1, UUID: uuid1}
	return []decideCase{
		{"boot", none, q, ipxe.AnswerBoot, http.StatusOK, ""},
		{"fenced", func(f *fakeHost) { f.active = false }, q, ipxe.AnswerFenced, http.StatusServiceUnavailable, ipxe.ReasonFenced},
		{"epoch zero", func(f *fakeHost) { f.epoch = 0 }, q, ipxe.AnswerFenced, http.StatusServiceUnavailable, ipxe.ReasonFenced},
		{"unknown", none, ipxe.Query{MAC: mac2}, ipxe.AnswerExit, http.StatusNotFound, ipxe.ReasonUnknown},
		{"lapsed", func(f *fakeHost) { f.clock.Advance(3 * time.Hour) }, q, ipxe.AnswerExit, http.StatusNotFound, ipxe.ReasonUnknown},
		{"mismatch", func(f *fakeHost) { f.entryErr = ipxe.ErrMismatch }, q, ipxe.AnswerExit, http.StatusNotFound, ipxe.ReasonMismatch},
		{"unbound", func(f *fakeHost) { f.entryErr = ipxe.ErrUnbound }, q, ipxe.AnswerExit, http.StatusNotFound, ipxe.ReasonUnbound},
		{"ip refused", none, ipxe.Query{MAC: mac1, UUID: uuid1, IP: netip.MustParseAddr("192.0.2.77")},
			ipxe.AnswerExit, http.StatusNotFound, ipxe.ReasonIPRefused},
		{"uuid refused", none, ipxe.Query{MAC: mac1, UUID: uuid2}, ipxe.AnswerExit, http.StatusNotFound, ipxe.ReasonUUIDRefused},
		{"token wait", func(f *fakeHost) { f.tokenErr = ipxe.ErrNotReady }, q, ipxe.AnswerWait, http.StatusServiceUnavailable, ipxe.ReasonTokenWait},
		{"sanboot wait", sanboot(false), q, ipxe.AnswerWait, http.StatusServiceUnavailable, ipxe.ReasonSanbootWait},
		{"sanboot", sanboot(true), q, ipxe.AnswerSanboot, http.StatusOK, ""},
		{"sign fails", func(f *fakeHost) { f.signErr = errors.New("key unreadable") }, q, ipxe.AnswerWait, http.StatusInternalServerError, ipxe.ReasonError},
		{"no mac", none, ipxe.Query{}, ipxe.AnswerExit, http.StatusBadRequest, ipxe.ReasonBadQuery},
	}
}

func TestDecide(t *testing.T) {
	for _, tc := range decideCases() {
		t.Run(tc.name, func(t *testing.T) {
			host := newFakeHost()
			tc.setup(host)
			h, err := ipxe.NewHandler(host.config())
			if err != nil {
				t.Fatal(err)
			}
			q := tc.query
			q.Remote = local
			a := h.Decide(context.Background(), q)
			if a.Kind != tc.kind || a.Status != tc.status || a.Reason != tc.reason {
				t.Fatalf("Decide = %v %d %q, want %v %d %q", a.Kind, a.Status, a.Reason, tc.kind, tc.status, tc.reason)
			}
			if a.Query != q {
				t.Errorf("answer's query %+v, want %+v", a.Query, q)
			}
			// Only a boot answer carries a secret, and only it signs an assertion.
			host.mu.Lock()
			signed := len(host.claims)
			host.mu.Unlock()
			switch a.Kind {
			case ipxe.AnswerBoot:
				if signed != 1 || a.Kernel == "" || len(a.Params) == 0 {
					t.Errorf("boot answer: %d assertions, kernel %q, params %v", signed, a.Kernel, a.Params)
				}
			case ipxe.AnswerSanboot:
				if want := "http://192.0.2.1:8080/cache/t/fedcba9876543210fedcba9876543210/" + isoA; a.URL != want {
					t.Errorf("URL %q, want %q", a.URL, want)
				}
			default:
				if signed != 0 || a.Kernel != "" || a.Params != nil || a.URL != "" {
					t.Errorf("a refusal carries %d assertions, kernel %q, params %v, url %q", signed, a.Kernel, a.Params, a.URL)
				}
			}
			if (a.Kind == ipxe.AnswerWait || a.Kind == ipxe.AnswerFenced) && a.Delay <= 0 {
				t.Errorf("%v without a delay", a.Kind)
			}
		})
	}
}

// Decide counts as a request would, and reports an unknown MAC to OnDiscovered.
func TestDecideCountsAndDiscovers(t *testing.T) {
	host := newFakeHost()
	h, err := ipxe.NewHandler(host.config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h.Decide(ctx, ipxe.Query{MAC: mac1, UUID: uuid1, Remote: local})
	h.Decide(ctx, ipxe.Query{MAC: mac2, Remote: local, Loader: "grub"})
	if s := h.Stats(); s.Scripts != 1 || s.Unknown != 1 || s.Discovered != 1 || s.Requests != 0 {
		t.Errorf("stats %+v", s)
	}
	host.mu.Lock()
	defer host.mu.Unlock()
	if len(host.discovered) != 1 || host.discovered[0].Query.MAC != mac2 || host.discovered[0].Query.Loader != "grub" {
		t.Errorf("discovered %+v", host.discovered)
	}
}

// What /boot/ipxe answers is Decide's answer for the same query, spelled in iPXE's language.
func TestServeHTTPSpellsDecide(t *testing.T) {
	for _, tc := range decideCases() {
		t.Run(tc.name, func(t *testing.T) {
			decider, server := newFakeHost(), newFakeHost()
			tc.setup(decider)
			tc.setup(server)
			hd, err := ipxe.NewHandler(decider.config())
			if err != nil {
				t.Fatal(err)
			}
			q := tc.query
			q.Remote = local
			a := hd.Decide(context.Background(), q)

			_, srv := serve(t, server.config())
			path := ipxe.PathBoot + "?" + q.Encode()
			if q.MAC == (hwid.MAC{}) {
				path = ipxe.PathBoot + "?mac="
			}
			got := get(t, srv, http.MethodGet, path)
			wantStatus := a.Status
			if a.Kind == ipxe.AnswerExit {
				wantStatus = http.StatusOK // iPXE runs only a 2xx body: the exit script must run
			}
			if got.status != wantStatus {
				t.Errorf("status %d, want %d (Decide's %d)", got.status, wantStatus, a.Status)
			}
			var want renderer
			switch a.Kind {
			case ipxe.AnswerBoot:
				want = ipxe.Boot{Kernel: a.Kernel, Initrds: a.Initrds, Params: a.Params, Cmdline: a.Cmdline, Again: ipxe.PathChain}
			case ipxe.AnswerSanboot:
				want = ipxe.Sanboot{URL: a.URL, Again: ipxe.PathChain}
			case ipxe.AnswerFenced:
				want = ipxe.Fenced{Delay: a.Delay}
			case ipxe.AnswerWait:
				want = ipxe.Wait{Delay: a.Delay, URL: ipxe.PathChain}
			default:
				want = ipxe.Exit{}
			}
			if diff := cmp.Diff(string(mustRender(t, want)), string(got.body)); diff != "" {
				t.Errorf("body (-Decide's answer spelled +served):\n%s", diff)
			}
		})
	}
}
