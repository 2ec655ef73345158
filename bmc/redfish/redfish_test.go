package redfish_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// testpeer forks the emulators from one thread that lives as long as the binary.
	goleak.VerifyTestMain(m, testpeer.IgnoreForker)
}

func target(srv *bmctest.Server) bmc.Target {
	return bmc.Target{Driver: redfish.Name, Address: srv.URL, Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}
}

// start serves a fake BMC, dials it and forgets the requests the dial made.
func start(t *testing.T, opts bmctest.Options, cfg redfish.Config) (*bmctest.Server, *redfish.Driver) {
	t.Helper()
	srv := bmctest.NewServer(opts)
	t.Cleanup(srv.Close)
	cfg.PollInterval = time.Millisecond
	if cfg.SettleTime == 0 {
		cfg.SettleTime = time.Millisecond
	}
	d, err := redfish.Dial(context.Background(), cfg, target(srv))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	srv.ResetRequests()
	return srv, d
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// sent lists "METHOD path" for the requests that change something.
func sent(reqs []bmctest.Request) []string {
	var out []string
	for _, r := range reqs {
		if r.Method != http.MethodGet {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// resets lists the ResetType of each accepted Reset action.
func resets(reqs []bmctest.Request) []string {
	out := []string{}
	for _, r := range reqs {
		if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/Actions/ComputerSystem.Reset") && r.Status < 300 {
			out = append(out, r.JSON()["ResetType"].(string))
		}
	}
	return out
}

func boot(srv *bmctest.Server) map[string]any {
	return srv.Resource(bmctest.SystemPath)["Boot"].(map[string]any)
}

func kindIs(t *testing.T, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error %v, want kind %v", err, kind)
	}
	var oe *bmc.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("error %T is not a *bmc.OpError", err)
	}
}

func TestSessionLoginAndLogout(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{})
	defer srv.Close()
	d, err := redfish.Dial(ctx(t), redfish.Config{}, target(srv))
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Sessions(); got != 1 {
		t.Fatalf("sessions after Dial = %d, want 1", got)
	}
	if _, err := d.PowerState(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, r := range srv.Requests() {
		if r.Path != "/redfish/v1/" && r.Path != "/redfish/v1" && r.Method == http.MethodGet && r.Auth != "session" {
			t.Errorf("%s %s sent without the session token (auth %q)", r.Method, r.Path, r.Auth)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := srv.Sessions(); got != 0 {
		t.Fatalf("sessions after Close = %d, want 0 (logout)", got)
	}
	reqs := sent(srv.Requests())
	if len(reqs) != 2 || reqs[0] != "POST /redfish/v1/SessionService/Sessions" || !strings.HasPrefix(reqs[1], "DELETE /redfish/v1/SessionService/Sessions/") {
		t.Errorf("requests = %q, want a login then a DELETE of the session", reqs)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, err = d.PowerState(ctx(t))
	kindIs(t, err, bmc.ErrClosed)
}

func TestBasicAuthOpensNoSession(t *testing.T) {
	srv, d := start(t, bmctest.Options{}, redfish.Config{BasicAuth: true})
	if _, err := d.PowerState(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if srv.Sessions() != 0 {
		t.Errorf("basic auth opened %d sessions", srv.Sessions())
	}
	for _, r := range srv.Requests() {
		if r.Auth != "basic" {
			t.Errorf("%s %s auth %q, want basic", r.Method, r.Path, r.Auth)
		}
	}
}

func TestSessionLimitAndLogoutFreesIt(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{Vendor: bmctest.LenovoXCC, MaxSessions: 2})
	defer srv.Close()
	var ds []*redfish.Driver
	for range 2 {
		d, err := redfish.Dial(ctx(t), redfish.Config{}, target(srv))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	_, err := redfish.Dial(ctx(t), redfish.Config{}, target(srv))
	kindIs(t, err, bmc.ErrNoSession) // the same kind as a full IPMI session table
	if !strings.Contains(err.Error(), "session limit") {
		t.Errorf("error %q does not carry the BMC's message", err)
	}
	if err := ds[0].Close(); err != nil {
		t.Fatal(err)
	}
	d, err := redfish.Dial(ctx(t), redfish.Config{}, target(srv))
	if err != nil {
		t.Fatalf("Dial after a logout: %v", err)
	}
	for _, d := range append(ds[1:], d) {
		_ = d.Close()
	}
	if srv.Sessions() != 0 {
		t.Errorf("%d sessions left", srv.Sessions())
	}
}

func TestExpiredSessionLogsInAgain(t *testing.T) {
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	srv.ExpireSessions()
	st, err := d.PowerState(ctx(t))
	if err != nil {
		t.Fatalf("PowerState after expiry: %v", err)
	}
	if want := strings.ToLower(srv.Resource(bmctest.SystemPath)["PowerState"].(string)); string(st) != want {
		t.Errorf("PowerState = %q, want %q", st, want)
	}
	if srv.Sessions() != 1 {
		t.Errorf("sessions = %d, want 1", srv.Sessions())
	}
}

func TestWrongCredentials(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{})
	defer srv.Close()
	for _, basic := range []bool{false, true} {
		tg := target(srv)
		tg.Password = "wrong"
		d, err := redfish.Dial(ctx(t), redfish.Config{BasicAuth: basic}, tg)
		if d != nil {
			_ = d.Close()
		}
		kindIs(t, err, bmc.ErrAuth)
		if strings.Contains(err.Error(), "wrong") {
			t.Errorf("error %q leaks the password", err)
		}
	}
	if srv.Sessions() != 0 {
		t.Errorf("%d sessions open", srv.Sessions())
	}
}

func TestUnreachableAndTimeout(t *testing.T) {
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	_, err = redfish.Dial(ctx(t), redfish.Config{}, bmc.Target{Address: "http://" + addr, Username: "u", Password: "p"})
	kindIs(t, err, bmc.ErrUnreachable)
	if time.Since(start) > 5*time.Second {
		t.Errorf("refused connection took %v", time.Since(start))
	}

	// A listener that accepts and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			go func() { <-done; c.Close() }()
		}
	}()
	start = time.Now()
	c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = redfish.Dial(c, redfish.Config{}, bmc.Target{Address: "http://" + silent.Addr().String(), Username: "u", Password: "p"})
	kindIs(t, err, bmc.ErrTimeout)
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("deadline of 300ms honoured after %v", el)
	}
	_, err = redfish.Dial(context.Background(), redfish.Config{Timeout: 200 * time.Millisecond},
		bmc.Target{Address: "http://" + silent.Addr().String(), Username: "u", Password: "p"})
	kindIs(t, err, bmc.ErrTimeout)
}

func TestTLSVerification(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{TLS: true})
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	wrongPin := sha256.Sum256([]byte("another certificate"))
	tests := []struct {
		name string
		cfg  redfish.Config
		edit func(*bmc.Target)
		want error
	}{
		{"default refuses a self-signed certificate", redfish.Config{}, nil, bmc.ErrTLS},
		{"pinned certificate", redfish.Config{}, func(tg *bmc.Target) { tg.CertSHA256 = srv.CertificateSHA256() }, nil},
		{"wrong pin", redfish.Config{}, func(tg *bmc.Target) { tg.CertSHA256 = wrongPin[:] }, bmc.ErrTLS},
		{"CA pool", redfish.Config{RootCAs: pool}, nil, nil},
		{"insecure when asked", redfish.Config{}, func(tg *bmc.Target) { tg.Insecure = true }, nil},
		{"insecure did not leak", redfish.Config{}, nil, bmc.ErrTLS},
		{"bare host means https", redfish.Config{}, func(tg *bmc.Target) {
			tg.Address = strings.TrimPrefix(srv.URL, "https://")
			tg.CertSHA256 = srv.CertificateSHA256()
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := target(srv)
			if tc.edit != nil {
				tc.edit(&tg)
			}
			d, err := redfish.Dial(ctx(t), tc.cfg, tg)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				if _, err := d.PowerState(ctx(t)); err != nil {
					t.Fatalf("PowerState: %v", err)
				}
				_ = d.Close()
				return
			}
			kindIs(t, err, tc.want)
		})
	}
	if tc := http.DefaultTransport.(*http.Transport).TLSClientConfig; tc != nil && tc.InsecureSkipVerify {
		t.Error("the process-wide transport skips verification")
	}
}

func TestPower(t *testing.T) {
	tests := []struct {
		name       string
		from       string
		action     bmc.PowerAction
		powerCycle bool // the BMC offers PowerCycle
		wantResets []string
		wantState  string
		wantBoots  int
	}{
		{"on from off", "Off", bmc.PowerActionOn, false, []string{"On"}, "On", 1},
		{"on when on sends nothing", "On", bmc.PowerActionOn, false, []string{}, "On", 0},
		{"graceful off", "On", bmc.PowerActionOff, false, []string{"GracefulShutdown"}, "Off", 0},
		{"force off", "On", bmc.PowerActionForceOff, false, []string{"ForceOff"}, "Off", 0},
		{"off when off sends nothing", "Off", bmc.PowerActionForceOff, false, []string{}, "Off", 0},
		{"reset", "On", bmc.PowerActionReset, false, []string{"ForceRestart"}, "On", 1},
		{"cycle without PowerCycle", "On", bmc.PowerActionCycle, false, []string{"ForceOff", "On"}, "On", 1},
		{"cycle with PowerCycle", "On", bmc.PowerActionCycle, true, []string{"PowerCycle"}, "On", 1},
		{"cycle when off powers on", "Off", bmc.PowerActionCycle, false, []string{"On"}, "On", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, d := start(t, bmctest.Options{}, redfish.Config{})
			srv.SetPowerState(tc.from)
			if tc.powerCycle {
				srv.Patch(bmctest.SystemPath, map[string]any{"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
					"ResetType@Redfish.AllowableValues": []any{"On", "ForceOff", "ForceRestart", "PowerCycle"}}}})
			}
			// The power-on gate is waited at immediately before each power-on sent: at
			// each wait, the resets sent so far are those before it.
			var atGate []int
			gated := bmc.WithPowerOnGate(ctx(t), func(context.Context) error {
				atGate = append(atGate, len(resets(srv.Requests())))
				return nil
			})
			if err := d.SetPower(gated, tc.action); err != nil {
				t.Fatalf("SetPower: %v", err)
			}
			if diff := cmp.Diff(tc.wantResets, resets(srv.Requests())); diff != "" {
				t.Errorf("reset types sent (-want +got):\n%s", diff)
			}
			var wantGate []int
			for i, rt := range tc.wantResets {
				if rt == "On" || rt == "PowerCycle" {
					wantGate = append(wantGate, i)
				}
			}
			if diff := cmp.Diff(wantGate, atGate); diff != "" {
				t.Errorf("resets sent at each wait at the power-on gate (-want +got):\n%s", diff)
			}
			if got := srv.Resource(bmctest.SystemPath)["PowerState"]; got != tc.wantState {
				t.Errorf("PowerState = %v, want %s", got, tc.wantState)
			}
			if got := len(srv.Boots()); got != tc.wantBoots {
				t.Errorf("boots = %d, want %d", got, tc.wantBoots)
			}
			st, err := d.PowerState(ctx(t))
			if err != nil || !strings.EqualFold(string(st), tc.wantState) {
				t.Errorf("PowerState() = %q, %v; want %s", st, err, tc.wantState)
			}
		})
	}
	_, d := start(t, bmctest.Options{}, redfish.Config{})
	kindIs(t, d.SetPower(ctx(t), "explode"), bmc.ErrInvalid)
}

func TestPowerOnGateThatFailsSendsNothing(t *testing.T) {
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	srv.SetPowerState("Off")
	stop := errors.New("no turn")
	gated := bmc.WithPowerOnGate(ctx(t), func(context.Context) error { return stop })
	err := d.SetPower(gated, bmc.PowerActionOn)
	kindIs(t, err, bmc.ErrTimeout)
	if !errors.Is(err, stop) {
		t.Errorf("error %v does not wrap the gate's", err)
	}
	if got := resets(srv.Requests()); len(got) != 0 {
		t.Errorf("sent %q though the gate failed", got)
	}
	if got := srv.PowerState(); got != "Off" {
		t.Errorf("PowerState %s, want Off", got)
	}
}

func TestPowerWhenTheBMCOffersNoSuchReset(t *testing.T) {
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	srv.Patch(bmctest.SystemPath, map[string]any{"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
		"ResetType@Redfish.AllowableValues": []any{"On", "ForceOff"}}}})
	kindIs(t, d.SetPower(ctx(t), bmc.PowerActionOff), bmc.ErrUnsupported)
	if got := sent(srv.Requests()); len(got) != 0 {
		t.Errorf("sent %q for an unsupported action", got)
	}
}

func TestActionIfMatch412IsRetriedWithoutTheHeader(t *testing.T) {
	srv, d := start(t, bmctest.Options{IfMatch412: true}, redfish.Config{})
	if err := d.SetPower(ctx(t), bmc.PowerActionForceOff); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPost {
			got = append(got, r.Path+" if-match="+boolStr(r.IfMatch != "")+" "+http.StatusText(r.Status))
		}
	}
	want := []string{
		bmctest.SystemPath + "/Actions/ComputerSystem.Reset if-match=yes Precondition Failed",
		bmctest.SystemPath + "/Actions/ComputerSystem.Reset if-match=no No Content",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("POSTs (-want +got):\n%s", diff)
	}
	if srv.Resource(bmctest.SystemPath)["PowerState"] != "Off" {
		t.Error("machine not off")
	}
}

func boolStr(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// patches returns the Boot objects of the PATCHes sent to the system, with their status.
func patches(reqs []bmctest.Request) []string {
	var out []string
	for _, r := range reqs {
		if b, ok := r.JSON()["Boot"].(map[string]any); ok && r.Method == http.MethodPatch && strings.HasPrefix(r.Path, "/redfish/v1/Systems/") {
			out = append(out, strings.Join([]string{str(b["BootSourceOverrideTarget"]), str(b["BootSourceOverrideEnabled"]),
				str(b["BootSourceOverrideMode"]), http.StatusText(r.Status)}, " "))
		}
	}
	return out
}

func str(v any) string {
	if v == nil {
		return "-"
	}
	return v.(string)
}

func TestSetBootDevice(t *testing.T) {
	tests := []struct {
		name    string
		opts    bmctest.Options
		setup   map[string]any // merged into the system first
		dev     bmc.BootDevice
		wantErr error
		// wantPatches: "Target Enabled Mode Status" of each PATCH sent, "-" for absent.
		wantPatches []string
		// wantBoot: the system's Boot afterwards (Target Enabled Mode).
		wantBoot []string
	}{
		{name: "pxe once uefi", dev: bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI},
			wantPatches: []string{"Pxe Once UEFI OK"}, wantBoot: []string{"Pxe", "Once", "UEFI"}},
		{name: "disk persistent legacy", dev: bmc.BootDevice{Target: bmc.BootDisk, Mode: bmc.BootModeLegacy, Persistent: true},
			wantPatches: []string{"Hdd Continuous Legacy OK"}, wantBoot: []string{"Hdd", "Continuous", "Legacy"}},
		{name: "cd keeps the current mode", setup: map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "Legacy"}},
			dev:         bmc.BootDevice{Target: bmc.BootCD},
			wantPatches: []string{"Cd Once Legacy OK"}, wantBoot: []string{"Cd", "Once", "Legacy"}},
		{name: "none disables the override", dev: bmc.BootDevice{Target: bmc.BootNone},
			wantPatches: []string{"None Disabled UEFI OK"}, wantBoot: []string{"None", "Disabled", "UEFI"}},
		{name: "http boot not offered by this BMC", dev: bmc.BootDevice{Target: bmc.BootHTTP},
			wantErr: bmc.ErrUnsupported, wantBoot: []string{"Pxe", "Once", "UEFI"}},
		{name: "http boot where offered", opts: bmctest.Options{AllowHTTPBoot: true},
			setup: map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "Legacy"}},
			dev:   bmc.BootDevice{Target: bmc.BootHTTP}, wantPatches: []string{"UefiHttp Once UEFI OK"},
			wantBoot: []string{"UefiHttp", "Once", "UEFI"}},
		{name: "http boot in legacy mode is invalid", opts: bmctest.Options{AllowHTTPBoot: true},
			dev: bmc.BootDevice{Target: bmc.BootHTTP, Mode: bmc.BootModeLegacy}, wantErr: bmc.ErrInvalid,
			wantBoot: []string{"Pxe", "Once", "UEFI"}},
		{name: "iLO rejects the mode: sent again without it", opts: bmctest.Options{Vendor: bmctest.HPEiLO},
			setup:       map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Disabled"}},
			dev:         bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI},
			wantPatches: []string{"Pxe Once UEFI Bad Request", "Pxe Once - OK"},
			wantBoot:    []string{"Pxe", "Once", "UEFI"}},
		{name: "Supermicro gets the mode it needs", opts: bmctest.Options{Vendor: bmctest.Supermicro},
			dev:         bmc.BootDevice{Target: bmc.BootPXE},
			wantPatches: []string{"Pxe Once UEFI OK"}, wantBoot: []string{"Pxe", "Once", "UEFI"}},
		{name: "Supermicro without a current mode gets UEFI on retry", opts: bmctest.Options{Vendor: bmctest.Supermicro},
			setup:       map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": nil}},
			dev:         bmc.BootDevice{Target: bmc.BootPXE},
			wantPatches: []string{"Pxe Once - Bad Request", "Pxe Once UEFI OK"},
			wantBoot:    []string{"Pxe", "Once", "UEFI"}},
		{name: "XCC refuses Continuous", opts: bmctest.Options{Vendor: bmctest.LenovoXCC},
			setup: map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Disabled"}},
			dev:   bmc.BootDevice{Target: bmc.BootPXE, Persistent: true}, wantErr: bmc.ErrUnsupported,
			wantPatches: []string{"Pxe Continuous UEFI Bad Request"},
			wantBoot:    []string{"Hdd", "Disabled", "UEFI"}},
		{name: "XCC takes Once", opts: bmctest.Options{Vendor: bmctest.LenovoXCC},
			dev:         bmc.BootDevice{Target: bmc.BootPXE},
			wantPatches: []string{"Pxe Once UEFI OK"}, wantBoot: []string{"Pxe", "Once", "UEFI"}},
		{name: "Continuous not in the allowed values is not sent",
			setup: map[string]any{"Boot": map[string]any{"BootSourceOverrideEnabled@Redfish.AllowableValues": []any{"Once", "Disabled"}}},
			dev:   bmc.BootDevice{Target: bmc.BootPXE, Persistent: true}, wantErr: bmc.ErrUnsupported,
			wantBoot: []string{"Pxe", "Once", "UEFI"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, d := start(t, tc.opts, redfish.Config{})
			if tc.setup != nil {
				srv.Patch(bmctest.SystemPath, tc.setup)
			}
			err := d.SetBootDevice(ctx(t), tc.dev)
			if tc.wantErr != nil {
				kindIs(t, err, tc.wantErr)
			} else if err != nil {
				t.Fatalf("SetBootDevice: %v", err)
			}
			if diff := cmp.Diff(tc.wantPatches, patches(srv.Requests())); diff != "" {
				t.Errorf("PATCHes (-want +got):\n%s", diff)
			}
			b := boot(srv)
			got := []string{str(b["BootSourceOverrideTarget"]), str(b["BootSourceOverrideEnabled"]), str(b["BootSourceOverrideMode"])}
			if diff := cmp.Diff(tc.wantBoot, got); diff != "" {
				t.Errorf("Boot afterwards (-want +got):\n%s", diff)
			}
			for _, r := range srv.Requests() {
				if r.Method == http.MethodPatch && r.IfMatch == "" && r.Status != http.StatusBadRequest && len(tc.wantPatches) == 1 {
					t.Errorf("PATCH sent without If-Match")
				}
			}
		})
	}
}

func TestOneTimeBootIsConsumedByTheNextBoot(t *testing.T) {
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := d.SetPower(ctx(t), bmc.PowerActionReset); err != nil {
			t.Fatal(err)
		}
	}
	want := []bmctest.Boot{{Target: "Pxe", Mode: "UEFI"}, {Target: "None"}}
	if diff := cmp.Diff(want, srv.Boots()); diff != "" {
		t.Errorf("boots (-want +got):\n%s", diff)
	}
}

func TestPatchIfMatch412FallsBackToNoHeader(t *testing.T) {
	srv, d := start(t, bmctest.Options{PatchIfMatch412: true}, redfish.Config{})
	if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootDisk}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPatch {
			got = append(got, "if-match="+boolStr(r.IfMatch != "")+" "+http.StatusText(r.Status))
		}
	}
	if diff := cmp.Diff([]string{"if-match=yes Precondition Failed", "if-match=no OK"}, got); diff != "" {
		t.Errorf("PATCHes (-want +got):\n%s", diff)
	}
	if boot(srv)["BootSourceOverrideTarget"] != "Hdd" {
		t.Error("boot target not applied")
	}
}

func macs(t *testing.T, srv *bmctest.Server, paths ...string) []hwid.MAC {
	t.Helper()
	var out []hwid.MAC
	for _, p := range paths {
		r := srv.Resource(p)
		s, _ := r["MACAddress"].(string)
		if e, ok := r["Ethernet"].(map[string]any); ok {
			s, _ = e["MACAddress"].(string)
		}
		m, err := hwid.ParseMAC(s)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, m)
	}
	return out
}

func TestInspect(t *testing.T) {
	eth := bmctest.SystemPath + "/EthernetInterfaces/"
	fn := bmctest.ChassisURI + "/NetworkAdapters/NIC1/NetworkDeviceFunctions/"
	tests := []struct {
		name    string
		opts    bmctest.Options
		nics    []string // resources whose MACs are the NICs, in order
		sources []string
	}{
		{"EthernetInterfaces", bmctest.Options{}, []string{eth + "12446A3B0411", eth + "12446A3B8890"},
			[]string{"EthernetInterfaces", "EthernetInterfaces"}},
		{"plus NetworkAdapters", bmctest.Options{NetworkAdapters: true},
			[]string{eth + "12446A3B0411", eth + "12446A3B8890", fn + "2"},
			[]string{"EthernetInterfaces", "EthernetInterfaces", "NetworkAdapters"}},
		{"only NetworkAdapters", bmctest.Options{NetworkAdapters: true, NoSystemEthernetInterfaces: true},
			[]string{fn + "1", fn + "2"}, []string{"NetworkAdapters", "NetworkAdapters"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, d := start(t, tc.opts, redfish.Config{})
			inv, err := d.Inspect(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			sys := srv.Resource(bmctest.SystemPath)
			u, err := hwid.ParseUUID(sys["UUID"].(string))
			if err != nil {
				t.Fatal(err)
			}
			if !inv.HasUUID || inv.UUID != u || inv.UUIDRaw != u {
				t.Errorf("UUID = %v (has %v), want %v", inv.UUID, inv.HasUUID, u)
			}
			if inv.Model != sys["Model"] || inv.Serial != sys["SerialNumber"] || inv.Manufacturer != sys["Manufacturer"] {
				t.Errorf("model/serial/manufacturer = %q/%q/%q", inv.Model, inv.Serial, inv.Manufacturer)
			}
			if !inv.NICsKnown {
				t.Error("NICsKnown = false over Redfish")
			}
			var gotMACs []hwid.MAC
			var gotSources []string
			for _, n := range inv.NICs {
				gotMACs = append(gotMACs, n.MAC)
				gotSources = append(gotSources, n.Source)
			}
			if diff := cmp.Diff(macs(t, srv, tc.nics...), gotMACs); diff != "" {
				t.Errorf("NIC MACs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.sources, gotSources); diff != "" {
				t.Errorf("NIC sources (-want +got):\n%s", diff)
			}
			bmcMAC := macs(t, srv, bmctest.ManagerURI+"/EthernetInterfaces/eth0")[0]
			if inv.BMCMAC != bmcMAC {
				t.Errorf("BMC MAC = %v, want %v", inv.BMCMAC, bmcMAC)
			}
			if !slices.Contains(inv.BMCAddrs, netip.MustParseAddr("192.168.0.10")) {
				t.Errorf("BMC addrs %v lack eth0's address", inv.BMCAddrs)
			}
			for _, a := range append(slices.Clone(inv.HostAddrs), inv.BMCAddrs...) {
				if a.IsLinkLocalUnicast() {
					t.Errorf("link-local address %v reported", a)
				}
			}
			if slices.Contains(inv.HostAddrs, netip.MustParseAddr("192.168.20.56")) {
				t.Error("the host interface to the BMC reported as a host address")
			}
		})
	}
}

func TestInspectDropsMalformedValues(t *testing.T) {
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	srv.Patch(bmctest.SystemPath, map[string]any{"UUID": "not-a-uuid\n"})
	srv.Patch(bmctest.SystemPath+"/EthernetInterfaces/12446A3B8890", map[string]any{"MACAddress": "zz:zz", "PermanentMACAddress": ""})
	inv, err := d.Inspect(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if inv.HasUUID {
		t.Errorf("malformed UUID accepted as %v", inv.UUID)
	}
	if len(inv.NICs) != 1 {
		t.Errorf("NICs = %v, want only the well-formed one", inv.NICs)
	}
}

func TestVirtualMedia(t *testing.T) {
	const image = "https://images.example/boot.iso"
	for _, noActions := range []bool{false, true} {
		name := "actions"
		if noActions {
			name = "patch"
		}
		t.Run(name, func(t *testing.T) {
			srv, d := start(t, bmctest.Options{NoMediaActions: noActions}, redfish.Config{})
			if err := d.InsertMedia(ctx(t), image); err != nil {
				t.Fatalf("InsertMedia: %v", err)
			}
			cd := srv.Resource(bmctest.CD1Path)
			if cd["Image"] != image || cd["Inserted"] != true {
				t.Errorf("CD1 after insert: Image %v Inserted %v", cd["Image"], cd["Inserted"])
			}
			want := []string{"POST " + bmctest.CD1Path + "/Actions/VirtualMedia.EjectMedia", "POST " + bmctest.CD1Path + "/Actions/VirtualMedia.InsertMedia"}
			if noActions {
				want = []string{"PATCH " + bmctest.CD1Path, "PATCH " + bmctest.CD1Path}
			}
			if diff := cmp.Diff(want, sent(srv.Requests())); diff != "" {
				t.Errorf("insert requests (-want +got):\n%s", diff)
			}
			srv.ResetRequests()
			if err := d.InsertMedia(ctx(t), image); err != nil {
				t.Fatal(err)
			}
			if got := sent(srv.Requests()); len(got) != 0 {
				t.Errorf("inserting the inserted image sent %q", got)
			}
			if err := d.EjectMedia(ctx(t)); err != nil {
				t.Fatalf("EjectMedia: %v", err)
			}
			if cd := srv.Resource(bmctest.CD1Path); cd["Inserted"] != false {
				t.Errorf("CD1 after eject: Inserted %v", cd["Inserted"])
			}
			srv.ResetRequests()
			if err := d.EjectMedia(ctx(t)); err != nil {
				t.Fatal(err)
			}
			if got := sent(srv.Requests()); len(got) != 0 {
				t.Errorf("ejecting an empty drive sent %q", got)
			}
			kindIs(t, d.InsertMedia(ctx(t), "file:///etc/passwd"), bmc.ErrInvalid)
		})
	}
}

func TestFirmwareUpdate(t *testing.T) {
	const image = "https://images.example/bmc-1.2.bin"
	t.Run("completes", func(t *testing.T) {
		srv, d := start(t, bmctest.Options{TaskPolls: 3}, redfish.Config{})
		res, err := d.UpdateFirmware(ctx(t), bmc.FirmwareUpdate{URL: image})
		if err != nil {
			t.Fatal(err)
		}
		if res.State != "Completed" || res.Task == "" || len(res.Messages) == 0 {
			t.Errorf("result = %+v", res)
		}
		if diff := cmp.Diff([]string{image}, srv.Updates()); diff != "" {
			t.Errorf("updates applied (-want +got):\n%s", diff)
		}
		polls := 0
		for _, r := range srv.Requests() {
			if strings.HasPrefix(r.Path, "/redfish/v1/TaskService/TaskMonitors/") {
				polls++
			}
			if r.Method == http.MethodPost {
				if r.JSON()["ImageURI"] != image || r.JSON()["TransferProtocol"] != "HTTPS" {
					t.Errorf("SimpleUpdate body %s", r.Body)
				}
			}
		}
		if polls != 3 {
			t.Errorf("task monitor polled %d times, want 3 (followed to the end)", polls)
		}
		task := srv.Resource("/redfish/v1/TaskService/Tasks/" + res.Task)
		if task["TaskState"] != "Completed" {
			t.Errorf("task state on the BMC = %v", task["TaskState"])
		}
	})
	t.Run("fails", func(t *testing.T) {
		srv, d := start(t, bmctest.Options{FailUpdate: true}, redfish.Config{})
		res, err := d.UpdateFirmware(ctx(t), bmc.FirmwareUpdate{URL: image})
		kindIs(t, err, bmc.ErrRefused)
		if res.State != "Exception" || !strings.Contains(err.Error(), "signature verification failed") {
			t.Errorf("result %+v, error %v", res, err)
		}
		if len(srv.Updates()) != 0 {
			t.Error("a failed update was applied")
		}
	})
	t.Run("deadline", func(t *testing.T) {
		_, d := start(t, bmctest.Options{TaskPolls: 1 << 30}, redfish.Config{TaskTimeout: 50 * time.Millisecond})
		_, err := d.UpdateFirmware(ctx(t), bmc.FirmwareUpdate{URL: image})
		kindIs(t, err, bmc.ErrTimeout)
	})
	t.Run("bad url", func(t *testing.T) {
		srv, d := start(t, bmctest.Options{}, redfish.Config{})
		_, err := d.UpdateFirmware(ctx(t), bmc.FirmwareUpdate{URL: "ftp//x"})
		kindIs(t, err, bmc.ErrInvalid)
		if len(srv.Requests()) != 0 {
			t.Error("sent a request for an invalid URL")
		}
	})
}

func TestStorage(t *testing.T) {
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	disks, err := d.Storage(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var want []bmc.Disk
	for _, dev := range srv.Resource(bmctest.SystemPath + "/SimpleStorage/1")["Devices"].([]any) {
		m := dev.(map[string]any)
		st := m["Status"].(map[string]any)
		if st["State"] == "Absent" {
			continue
		}
		want = append(want, bmc.Disk{Name: m["Name"].(string), Model: m["Model"].(string),
			CapacityBytes: int64(m["CapacityBytes"].(float64)), Controller: "1", Health: st["Health"].(string)})
	}
	if len(want) == 0 {
		t.Fatal("mockup has no present devices")
	}
	if diff := cmp.Diff(want, disks); diff != "" {
		t.Errorf("disks (-want +got):\n%s", diff)
	}
}

func TestRotatePassword(t *testing.T) {
	t.Run("own account by action, session survives", func(t *testing.T) {
		srv, d := start(t, bmctest.Options{}, redfish.Config{})
		if err := d.RotatePassword(ctx(t), bmctest.DefaultUsername, "n3w-secret"); err != nil {
			t.Fatal(err)
		}
		if got := srv.Password(bmctest.DefaultUsername); got != "n3w-secret" {
			t.Errorf("password on the BMC = %q", got)
		}
		if got := sent(srv.Requests()); len(got) != 1 || !strings.HasSuffix(got[0], "/Actions/ManagerAccount.ChangePassword") {
			t.Errorf("requests %q", got)
		}
		srv.ExpireSessions() // the driver must log in again with the new password
		if _, err := d.PowerState(ctx(t)); err != nil {
			t.Errorf("after rotation: %v", err)
		}
	})
	t.Run("basic auth logs in again", func(t *testing.T) {
		srv, d := start(t, bmctest.Options{}, redfish.Config{BasicAuth: true})
		if err := d.RotatePassword(ctx(t), bmctest.DefaultUsername, "n3w-secret"); err != nil {
			t.Fatal(err)
		}
		if _, err := d.PowerState(ctx(t)); err != nil {
			t.Errorf("after rotation: %v", err)
		}
		if srv.Password(bmctest.DefaultUsername) != "n3w-secret" {
			t.Error("not rotated")
		}
	})
	t.Run("other account by PATCH when no action", func(t *testing.T) {
		srv, d := start(t, bmctest.Options{}, redfish.Config{})
		srv.Patch(bmctest.Account2, map[string]any{"Actions": map[string]any{"#ManagerAccount.ChangePassword": nil}})
		if err := d.RotatePassword(ctx(t), "contoso_employee457", "emp-2"); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"PATCH " + bmctest.Account2}, sent(srv.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if srv.Password("contoso_employee457") != "emp-2" || srv.Password(bmctest.DefaultUsername) != bmctest.DefaultPassword {
			t.Error("wrong account changed")
		}
		if p := srv.Resource(bmctest.Account2)["Password"]; p != nil {
			t.Errorf("the password shows in the resource: %v", p)
		}
	})
	t.Run("unknown account", func(t *testing.T) {
		_, d := start(t, bmctest.Options{}, redfish.Config{})
		kindIs(t, d.RotatePassword(ctx(t), "nobody", "x"), bmc.ErrInvalid)
	})
}

func TestRegistryAndJournal(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{})
	defer srv.Close()
	reg := bmc.NewRegistry()
	if err := reg.Register(redfish.Name, redfish.Config{}); err != nil {
		t.Fatal(err)
	}
	d, err := reg.Open(ctx(t), target(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pc, ok := d.(bmc.PowerController)
	if !ok {
		t.Fatal("the redfish driver is not a PowerController")
	}
	srv.ResetRequests()
	var r bmc.Runner
	for range 3 {
		if err := r.Run(ctx(t), "op-42", "power", func(ctx context.Context) error {
			return pc.SetPower(ctx, bmc.PowerActionReset)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"ForceRestart"}, resets(srv.Requests())); diff != "" {
		t.Errorf("a repeated operation id was sent again (-want +got):\n%s", diff)
	}
}

func TestStorageSubsystemDrives(t *testing.T) {
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	sp := bmctest.SystemPath + "/Storage"
	srv.Put(sp, "", map[string]any{"Name": "Storage Collection", "Members": []any{}})
	srv.Patch(bmctest.SystemPath, map[string]any{"Storage": map[string]any{"@odata.id": sp}})
	srv.Put(sp+"/RAID1", sp, map[string]any{"Id": "RAID1", "Drives": []any{
		map[string]any{"@odata.id": sp + "/RAID1/Drives/0"}, map[string]any{"@odata.id": sp + "/RAID1/Drives/1"}}})
	srv.Put(sp+"/RAID1/Drives/0", "", map[string]any{"Name": "Bay 0", "Model": "NVMe-3T", "SerialNumber": "S0",
		"CapacityBytes": 3.2e12, "Status": map[string]any{"State": "Enabled", "Health": "OK"}})
	srv.Put(sp+"/RAID1/Drives/1", "", map[string]any{"Name": "Bay 1", "Status": map[string]any{"State": "Absent"}})
	disks, err := d.Storage(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []bmc.Disk{{Name: "Bay 0", Model: "NVMe-3T", Serial: "S0", CapacityBytes: 3.2e12, Controller: "RAID1", Health: "OK"}}
	if diff := cmp.Diff(want, disks); diff != "" {
		t.Errorf("disks (-want +got):\n%s", diff)
	}
}

func TestVirtualMediaUnderTheManager(t *testing.T) {
	const image = "http://images.example/installer.iso"
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	// Like BMCs that keep virtual media under the manager: the system has none.
	srv.Patch(bmctest.SystemPath, map[string]any{"VirtualMedia": map[string]any{"@odata.id": bmctest.SystemPath + "/NoVirtualMedia"}})
	vm := bmctest.ManagerURI + "/VirtualMedia"
	srv.Put(vm, "", map[string]any{"Name": "Virtual Media", "Members": []any{}})
	srv.Patch(bmctest.ManagerURI, map[string]any{"VirtualMedia": map[string]any{"@odata.id": vm}})
	srv.Put(vm+"/USB1", vm, map[string]any{"Id": "USB1", "MediaTypes": []any{"USBStick"}})
	srv.Put(vm+"/CD", vm, map[string]any{"Id": "CD", "MediaTypes": []any{"CD", "DVD"}, "Inserted": false})
	if err := d.InsertMedia(ctx(t), image); err != nil {
		t.Fatal(err)
	}
	if got := srv.Resource(vm + "/CD"); got["Image"] != image || got["Inserted"] != true {
		t.Errorf("manager CD after insert: %v", got)
	}
	if diff := cmp.Diff([]string{"PATCH " + vm + "/CD"}, sent(srv.Requests())); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestCycleWaitsForOffBeforeOn(t *testing.T) {
	srv, d := start(t, bmctest.Options{PowerOffPolls: 3}, redfish.Config{})
	if err := d.SetPower(ctx(t), bmc.PowerActionCycle); err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, r := range srv.Requests() {
		switch {
		case r.Method == http.MethodPost:
			seq = append(seq, r.JSON()["ResetType"].(string))
		case r.Method == http.MethodGet && r.Path == bmctest.SystemPath && len(seq) > 0:
			seq = append(seq, "GET")
		}
	}
	// Three reads answer PoweringOff, the fourth Off; only then On, read back as On.
	if diff := cmp.Diff([]string{"ForceOff", "GET", "GET", "GET", "GET", "On", "GET"}, seq); diff != "" {
		t.Errorf("sequence (-want +got):\n%s", diff)
	}
	if srv.Resource(bmctest.SystemPath)["PowerState"] != "On" || len(srv.Boots()) != 1 {
		t.Error("machine not back on")
	}
}

func TestOnOpReportsEachOperation(t *testing.T) {
	var mu sync.Mutex
	var got []string
	cfg := redfish.Config{OnOp: func(ev bmc.OpEvent) {
		mu.Lock()
		defer mu.Unlock()
		kind := "ok"
		if k := bmc.KindOf(ev.Err); k != nil {
			kind = k.Error()
		}
		if ev.Driver != redfish.Name || ev.Addr == "" || ev.Duration <= 0 {
			t.Errorf("event %+v", ev)
		}
		got = append(got, ev.Op+" "+kind)
	}}
	_, d := start(t, bmctest.Options{}, cfg)
	_, _ = d.PowerState(ctx(t))
	_ = d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootHTTP})
	want := []string{"open ok", "power-state ok", "set-boot " + bmc.ErrUnsupported.Error()}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
