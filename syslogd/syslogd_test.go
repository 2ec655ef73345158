package syslogd_test

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/syslogd"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want syslogd.Message
	}{
		// iPXE's src/net/udp/syslog.c: "<%d>%s%s%s%sipxe: %s%s", facility user, no hostname
		{"<14>ipxe: Booting from http://192.0.2.1/boot/chain.ipxe\n",
			syslogd.Message{Format: syslogd.RFC3164, Facility: 1, Severity: 6, App: "ipxe", Text: "Booting from http://192.0.2.1/boot/chain.ipxe"}},
		// with ${hostname} and ${domain} set
		{"<11>node7.example.net ipxe: Connection timed out (https://ipxe.org/4c0a6035)\n",
			syslogd.Message{Format: syslogd.RFC3164, Facility: 1, Severity: 3, Hostname: "node7.example.net", App: "ipxe", Text: "Connection timed out (https://ipxe.org/4c0a6035)"}},
		{"<30>Dec  5 10:00:00 host dhclient: bound to 192.0.2.5",
			syslogd.Message{Format: syslogd.RFC3164, Facility: 3, Severity: 6, Hostname: "host", App: "dhclient", Text: "bound to 192.0.2.5"}},
		{"<13>a line with no tag",
			syslogd.Message{Format: syslogd.RFC3164, Facility: 1, Severity: 5, Text: "a line with no tag"}},
		{`<165>1 2026-12-05T10:00:00Z mymachine app 1 ID47 [ex@32473 iut="3" x="a\]b"] BOM` + "\xef\xbb\xbfhello",
			syslogd.Message{Format: syslogd.RFC5424, Facility: 20, Severity: 5, Hostname: "mymachine", App: "app", Text: "BOM\xef\xbb\xbfhello"}},
		{"<34>1 2026-12-05T10:00:00Z - - - - - hi",
			syslogd.Message{Format: syslogd.RFC5424, Facility: 4, Severity: 2, Hostname: "-", App: "-", Text: "hi"}},
	}
	for _, tt := range tests {
		got, err := syslogd.Parse([]byte(tt.in))
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
	for _, bad := range []string{"", "hello", "<>x", "<1234>x", "<192>x", "<01>x", "<a>x", "<14>1 2026 host", "<14>1 t h a p m [unterminated"} {
		if _, err := syslogd.Parse([]byte(bad)); syslogd.ReasonOf(err) != "malformed" {
			t.Errorf("Parse(%q) = %v, want malformed", bad, err)
		}
	}
}

func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[0m\x1b[31mfailed\x1b[0m: 0x3e\x00": "failed: 0x3e",
		"tab\there\r\n":                          "tab here",
		"\x1bcreset":                             "reset",
	} {
		if got := syslogd.CleanText(in, 80); got != want {
			t.Errorf("CleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestServerPutsConsoleInTimeline sends iPXE's syslog lines over loopback UDP and finds
// them in the machine's timeline, by the address its DHCP answer went to.
func TestServerPutsConsoleInTimeline(t *testing.T) {
	tl, err := bootevents.NewTimeline(bootevents.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mac := hwid.MustParseMAC("52:54:00:12:34:56")
	tl.Emit(bootevents.Event{MAC: mac, Stage: bootevents.StageBoot4011, Outcome: bootevents.OutcomeOK, Addr: netip.MustParseAddr("127.0.0.1")})

	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan bootevents.Event, 8)
	srv := &syslogd.Server{Sink: bootevents.Tee(tl, bootevents.SinkFunc(func(e bootevents.Event) { got <- e })), Resolve: tl}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(conn) }()

	c, err := net.Dial("udp", conn.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lines := []string{
		"<14>ipxe: iPXE initialising devices...\x1b[0m\n",
		"not syslog",
		"<11>ipxe: Could not boot: No such file (https://ipxe.org/2d0c613b)\n",
		"<14>ipxe: http://127.0.0.1:8080/cache/t/0123456789abcdef0123456789abcdef/vmlinuz... ok\n",
	}
	for _, l := range lines {
		if _, err := c.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case <-got:
		case <-time.After(time.Minute): // loopback UDP to a reader already serving; the bound only stops a hung test
			t.Fatal("no line arrived")
		}
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, syslogd.ErrServerClosed) {
		t.Errorf("Serve = %v, want ErrServerClosed", err)
	}
	m, _ := tl.Machine(mac)
	b, _ := m.Last()
	want := []string{
		"info: iPXE initialising devices...",
		"err: Could not boot: No such file (https://ipxe.org/2d0c613b)",
		"info: http://127.0.0.1:8080/cache/t/(redacted)/vmlinuz... ok", // the grant is a secret
	}
	var gotLines []string
	for _, l := range b.Console {
		gotLines = append(gotLines, l.Severity+": "+l.Text)
	}
	if diff := cmp.Diff(want, gotLines); diff != "" {
		t.Errorf("console (-want +got):\n%s", diff)
	}
	if st := srv.Stats(); st.Received != 4 || st.Malformed != 1 || st.Lines != 3 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestServeNoSink(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := (&syslogd.Server{}).Serve(conn); syslogd.ReasonOf(err) != "no-sink" {
		t.Errorf("Serve = %v", err)
	}
}
