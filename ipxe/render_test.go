package ipxe_test

import (
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/ipxe"
)

var update = flag.Bool("update", false, "rewrite the golden scripts in testdata/golden")

type renderer interface{ Render() ([]byte, error) }

var sampleBoot = ipxe.Boot{
	Kernel:  "http://192.0.2.1:8080/ramdisk/vmlinuz",
	Initrds: []string{"http://192.0.2.1:8080/ramdisk/initrd.img", "http://192.0.2.1:8080/ramdisk/extra.cpio"},
	Params: []ipxe.Param{
		{Name: "bc.gateway", Value: "https://gw.example.net:443"},
		{Name: "bc.pins", Value: "sha256:4d2f0a4c9e0b7f3a"},
		{Name: "bc.token", Value: "bcjt_01k5w.c2VjcmV0"},
		{Name: "bc.assertion", Value: "eyJzaXRlIjoic2l0ZV8xIn0.c2lnbmF0dXJl"},
		{Name: "bc.cache", Value: "http://192.0.2.1:8080/cache/t/0123456789abcdef0123456789abcdef/"},
	},
	Cmdline: []string{"console=ttyS0,115200n8", "quiet"},
	Retry:   ipxe.Retry{Attempts: 3, Delay: 2 * time.Second, MaxDelay: 30 * time.Second},
	Again:   "/boot/chain.ipxe",
}

var sampleSanboot = ipxe.Sanboot{
	URL:   "http://192.0.2.1:8080/cache/t/0123456789abcdef0123456789abcdef/" + strings.Repeat("ab", 32),
	Again: "/boot/chain.ipxe",
}

// goldens holds one script of every kind, with the shape each must have.
var goldens = []struct {
	name  string
	r     renderer
	shape func() shape
}{
	{"boot", sampleBoot, func() shape { return bootShape(sampleBoot) }},
	{"boot-noretry", ipxe.Boot{Kernel: "tftp://192.0.2.1/vmlinuz", Retry: ipxe.Retry{Attempts: 1}},
		func() shape {
			return bootShape(ipxe.Boot{Kernel: "tftp://192.0.2.1/vmlinuz", Retry: ipxe.Retry{Attempts: 1}})
		}},
	{"chain", ipxe.Chain{URL: "/boot/ipxe"}, func() shape { return chainShape(ipxe.Chain{URL: "/boot/ipxe"}) }},
	{"chain-syslog", ipxe.Chain{URL: "/boot/ipxe", Nonce: "n0nce", Syslog: netip.MustParseAddr("192.0.2.2")}, func() shape {
		return chainShape(ipxe.Chain{URL: "/boot/ipxe", Nonce: "n0nce", Syslog: netip.MustParseAddr("192.0.2.2")})
	}},
	{"chain-net1", ipxe.Chain{URL: "/boot/ipxe", Interface: "net1"}, func() shape { return chainShape(ipxe.Chain{URL: "/boot/ipxe", Interface: "net1"}) }},
	{"chain-vlan", ipxe.Chain{URL: "http://192.0.2.1/boot/ipxe", Interface: "net0", VLAN: 100, Retry: ipxe.Retry{Attempts: 2}},
		func() shape {
			return chainShape(ipxe.Chain{URL: "http://192.0.2.1/boot/ipxe", Interface: "net0", VLAN: 100, Retry: ipxe.Retry{Attempts: 2}})
		}},
	{"exit", ipxe.Exit{}, func() shape {
		return shape{counts: map[string]int{"exit": 1}, args: map[string]func([]string) bool{"exit": exactly("1")}}
	}},
	{"fenced", ipxe.Fenced{}, func() shape {
		return shape{counts: map[string]int{"echo": 1, "sleep": 1, "exit": 1},
			args: map[string]func([]string) bool{"echo": anyArgs, "sleep": exactly("10"), "exit": exactly("1")}}
	}},
	{"wait", ipxe.Wait{URL: "/boot/chain.ipxe"}, func() shape { return waitShape(ipxe.Wait{URL: "/boot/chain.ipxe"}) }},
	{"sanboot", sampleSanboot, func() shape { return sanbootShape(sampleSanboot) }},
}

func TestGolden(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			got, err := g.r.Render()
			if err != nil {
				t.Fatal(err)
			}
			if err := g.shape().check(got); err != nil {
				t.Fatalf("script shape: %v\n%s", err, got)
			}
			path := filepath.Join("testdata", "golden", g.name+".ipxe")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("script differs from %s (-want +got):\n%s", path, diff)
			}
		})
	}
}

// TestShapeCatchesInjection makes sure the checker would notice what the renderer must
// prevent, so that its passing means something.
func TestShapeCatchesInjection(t *testing.T) {
	good, err := sampleBoot.Render()
	if err != nil {
		t.Fatal(err)
	}
	token := "bc.token=bcjt_01k5w.c2VjcmV0"
	for name, evil := range map[string]string{
		"new line":    "bc.token=x\nreboot",
		"space":       "bc.token=x bc.evil=1",
		"expansion":   "bc.token=${evil}",
		"separator":   "bc.token=x || shell",
		"comment":     "bc.token=x #",
		"continued":   "bc.token=x\\",
		"nbsp":        "bc.token=x\xa0bc.evil=1",
		"quote":       "bc.token=\"x",
		"carriage":    "bc.token=x\rreboot",
		"semicolon":   "bc.token=x ; shell",
		"other value": "bc.token=bcjt_01k5w.c2VjcmV1",
	} {
		bad := []byte(strings.Replace(string(good), token, evil, 1))
		if err := bootShape(sampleBoot).check(bad); err == nil {
			t.Errorf("%s: checker accepted a tampered script", name)
		}
	}
}

// loadCorpus reads testdata/injection.txt: the hostile values run through every field.
func loadCorpus(tb testing.TB) []string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "injection.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.Unquote(line)
		if err != nil {
			tb.Fatalf("testdata/injection.txt: %q: %v", line, err)
		}
		out = append(out, v)
	}
	if len(out) < 50 {
		tb.Fatalf("corpus has only %d values", len(out))
	}
	return out
}

// fields lists every value a script takes, each as a way to build a script with v in it.
var fields = []struct {
	name  string
	build func(v string) (renderer, shape)
}{
	{"kernel", func(v string) (renderer, shape) { b := sampleBoot; b.Kernel = v; return b, bootShape(b) }},
	{"initrd", func(v string) (renderer, shape) {
		b := sampleBoot
		b.Initrds = []string{b.Initrds[0], v}
		return b, bootShape(b)
	}},
	{"param name", func(v string) (renderer, shape) {
		b := sampleBoot
		b.Params = append([]ipxe.Param{{Name: v, Value: "1"}}, b.Params[1:]...)
		return b, bootShape(b)
	}},
	{"param value", func(v string) (renderer, shape) {
		b := sampleBoot
		b.Params = append([]ipxe.Param{{Name: "bc.token", Value: v}}, b.Params[3:]...)
		return b, bootShape(b)
	}},
	{"cmdline token", func(v string) (renderer, shape) {
		b := sampleBoot
		b.Cmdline = []string{"quiet", v}
		return b, bootShape(b)
	}},
	{"boot again", func(v string) (renderer, shape) { b := sampleBoot; b.Again = v; return b, bootShape(b) }},
	{"sanboot url", func(v string) (renderer, shape) { s := sampleSanboot; s.URL = v; return s, sanbootShape(s) }},
	{"sanboot again", func(v string) (renderer, shape) { s := sampleSanboot; s.Again = v; return s, sanbootShape(s) }},
	{"chain url", func(v string) (renderer, shape) { c := ipxe.Chain{URL: v}; return c, chainShape(c) }},
	{"chain interface", func(v string) (renderer, shape) {
		c := ipxe.Chain{URL: "/boot/ipxe", Interface: v, VLAN: 7}
		return c, chainShape(c)
	}},
	{"wait url", func(v string) (renderer, shape) { w := ipxe.Wait{URL: v}; return w, waitShape(w) }},
}

// TestInjectionCorpus runs every hostile value through every field: each is refused with a
// typed error, or the script has exactly its expected commands with the value, whole, in
// its place.
func TestInjectionCorpus(t *testing.T) {
	hostile := loadCorpus(t)
	for _, f := range fields {
		for _, v := range hostile {
			r, sh := f.build(v)
			got, err := r.Render()
			if err != nil {
				var ve *ipxe.ValueError
				if !errors.As(err, &ve) || !(errors.Is(err, ipxe.ErrUnsafe) || errors.Is(err, ipxe.ErrInvalid)) {
					t.Errorf("%s=%q: error %v is not a *ValueError", f.name, v, err)
				}
				if strings.Contains(err.Error(), v) && len(v) > 3 {
					t.Errorf("%s=%q: error echoes the value: %v", f.name, v, err)
				}
				continue
			}
			if err := sh.check(got); err != nil {
				t.Errorf("%s=%q rendered but the script is not as given: %v\n%s", f.name, v, err, got)
			}
		}
	}
}

func TestRefusals(t *testing.T) {
	long := make([]string, 0, 200)
	for range 200 {
		long = append(long, "console=ttyS0,115200n8")
	}
	for _, tc := range []struct {
		name  string
		r     renderer
		field string
		is    error
	}{
		{"space in value", ipxe.Boot{Kernel: "/k", Params: []ipxe.Param{{Name: "bc.token", Value: "a b"}}}, "params[bc.token]", ipxe.ErrUnsafe},
		{"expansion in value", ipxe.Boot{Kernel: "/k", Params: []ipxe.Param{{Name: "bc.x", Value: "${ip}"}}}, "params[bc.x]", ipxe.ErrUnsafe},
		{"duplicate param", ipxe.Boot{Kernel: "/k", Params: []ipxe.Param{{Name: "bc.x", Value: "1"}, {Name: "bc.x", Value: "2"}}}, "params[bc.x]", ipxe.ErrInvalid},
		{"cmdline sets bc.", ipxe.Boot{Kernel: "/k", Cmdline: []string{"bc.token=x"}}, "cmdline[0]", ipxe.ErrInvalid},
		{"cmdline comment", ipxe.Boot{Kernel: "/k", Cmdline: []string{"#x"}}, "cmdline[0]", ipxe.ErrUnsafe},
		{"cmdline separator", ipxe.Boot{Kernel: "/k", Cmdline: []string{"||"}}, "cmdline[0]", ipxe.ErrUnsafe},
		{"cmdline too long", ipxe.Boot{Kernel: "/k", Cmdline: long}, "cmdline", ipxe.ErrInvalid},
		{"kernel scheme", ipxe.Boot{Kernel: "ftp://h/k"}, "kernel", ipxe.ErrInvalid},
		{"kernel relative", ipxe.Boot{Kernel: "k"}, "kernel", ipxe.ErrInvalid},
		{"relative with colon", ipxe.Boot{Kernel: "/k?a=b:c"}, "kernel", ipxe.ErrInvalid},
		{"attempts", ipxe.Boot{Kernel: "/k", Retry: ipxe.Retry{Attempts: 17}}, "retry.attempts", ipxe.ErrInvalid},
		{"sub-second delay", ipxe.Boot{Kernel: "/k", Retry: ipxe.Retry{Delay: 1500 * time.Millisecond}}, "retry.delay", ipxe.ErrInvalid},
		{"max below delay", ipxe.Boot{Kernel: "/k", Retry: ipxe.Retry{Delay: 10 * time.Second, MaxDelay: 5 * time.Second}}, "retry.max_delay", ipxe.ErrInvalid},
		{"sanboot tftp", ipxe.Sanboot{URL: "tftp://h/x.iso"}, "url", ipxe.ErrInvalid},
		{"chain query", ipxe.Chain{URL: "/boot/ipxe?x=1"}, "url", ipxe.ErrInvalid},
		{"vlan", ipxe.Chain{URL: "/boot/ipxe", Interface: "net0", VLAN: 4095}, "vlan", ipxe.ErrInvalid},
		{"vlan on netX", ipxe.Chain{URL: "/boot/ipxe", VLAN: 100}, "vlan", ipxe.ErrInvalid},
		{"interface netx lower case", ipxe.Chain{URL: "/boot/ipxe", Interface: "netx0X"}, "interface", ipxe.ErrInvalid},
		{"fenced delay", ipxe.Fenced{Delay: 2 * time.Hour}, "delay", ipxe.ErrInvalid},
		{"wait url", ipxe.Wait{URL: "/a b"}, "url", ipxe.ErrUnsafe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.r.Render()
			var ve *ipxe.ValueError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v, want a *ValueError", err)
			}
			if ve.Field != tc.field || !errors.Is(err, tc.is) {
				t.Errorf("got field %q (%v), want %q wrapping %v", ve.Field, err, tc.field, tc.is)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		r    ipxe.Retry
		want []string
	}{
		{ipxe.Retry{}, []string{"2", "4", "8", "10"}},
		{ipxe.Retry{Attempts: 6, Delay: 5 * time.Second, MaxDelay: 15 * time.Second}, []string{"5", "10", "15", "15", "15", "10"}},
		{ipxe.Retry{Attempts: 1}, []string{"10"}},
		{ipxe.Retry{Attempts: 3, Delay: time.Minute}, []string{"60", "60", "10"}},
	} {
		got, err := ipxe.Sanboot{URL: "http://h/x.iso", Retry: tc.r, Again: "/boot/chain.ipxe"}.Render()
		if err != nil {
			t.Fatal(err)
		}
		lines, err := parseIPXE(got)
		if err != nil {
			t.Fatal(err)
		}
		var sleeps []string
		for _, l := range lines {
			for _, c := range l.Cmds {
				if c.Argv[0] == "sleep" {
					sleeps = append(sleeps, c.Argv[1])
				}
			}
		}
		// The last sleep is the pause before the reboot, after a failed chain to Again.
		if diff := cmp.Diff(tc.want, sleeps); diff != "" {
			t.Errorf("%+v: sleeps (-want +got):\n%s", tc.r, diff)
		}
	}
}

// giveUpTail is what a script runs from its ":failed" label on, each command as its words
// joined by spaces, with "goto L" spelled out after the command it guards.
func giveUpTail(t *testing.T, script []byte) []string {
	t.Helper()
	lines, err := parseIPXE(script)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	on := false
	for _, l := range lines {
		if l.Label != "" {
			on = on || l.Label == "failed"
			if on {
				out = append(out, ":"+l.Label)
			}
			continue
		}
		if !on {
			continue
		}
		var words []string
		for _, c := range l.Cmds {
			words = append(words, c.Argv...)
			if c.Sep != "" {
				words = append(words, c.Sep)
			}
		}
		out = append(out, strings.Join(words, " "))
	}
	return out
}

// TestGiveUpFallsThrough: every script that gives up on the machine ends in "exit 1", a
// failure on which UEFI boots its next Boot#### entry, never in "reboot", which brings the
// machine back to the same network boot (for ever, where the site's DHCP names the chain
// URL and no agent is active), nor in a plain "exit", on which UEFI opens its Boot Manager
// (tinkerbell/tinkerbell #984). The fenced script waits its delay first; the chain script
// backs off through its attempts first. Only a script with a fallback URL, whose chain to
// it failed (the server gone mid-boot), still reboots, to reach whichever agent is active.
func TestGiveUpFallsThrough(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    renderer
		tail []string // from ":failed" on; nil: the whole script after its header
	}{
		{"chain", ipxe.Chain{URL: "/boot/ipxe", Retry: ipxe.Retry{Attempts: 3}},
			[]string{":failed", "echo siteboot: giving up after 3 attempts", "exit 1"}},
		{"chain on a VLAN", ipxe.Chain{URL: "/boot/ipxe", Interface: "net0", VLAN: 7, Retry: ipxe.Retry{Attempts: 1}},
			[]string{":failed", "echo siteboot: giving up after 1 attempts", "exit 1"}},
		{"boot without a fallback", ipxe.Boot{Kernel: "/k", Retry: ipxe.Retry{Attempts: 1}},
			[]string{":failed", "echo siteboot: giving up after 1 attempts", "exit 1"}},
		{"boot with a fallback", ipxe.Boot{Kernel: "/k", Retry: ipxe.Retry{Attempts: 1}, Again: "/boot/chain.ipxe"},
			[]string{":failed", "echo siteboot: giving up after 1 attempts", "chain --replace --autofree /boot/chain.ipxe || goto reboot",
				":reboot", "sleep 10", "reboot"}},
		{"sanboot with a fallback", ipxe.Sanboot{URL: "http://h/x.iso", Retry: ipxe.Retry{Attempts: 1}, Again: "/boot/chain.ipxe"},
			[]string{":failed", "echo siteboot: giving up after 1 attempts", "chain --replace --autofree /boot/chain.ipxe || goto reboot",
				":reboot", "sleep 10", "reboot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.r.Render()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.tail, giveUpTail(t, got)); diff != "" {
				t.Errorf("the give-up (-want +got):\n%s\n%s", diff, got)
			}
		})
	}

	for _, d := range []time.Duration{0, 45 * time.Second} {
		got, err := ipxe.Fenced{Delay: d}.Render()
		if err != nil {
			t.Fatal(err)
		}
		secs := int(d / time.Second)
		if d == 0 {
			secs = int(ipxe.DefaultFencedDelay / time.Second)
		}
		lines := strings.Split(strings.TrimSpace(string(got)), "\n")
		want := []string{
			"echo siteboot: boot server fenced, giving up in " + strconv.Itoa(secs) + " s",
			"sleep " + strconv.Itoa(secs),
			"exit 1",
		}
		if diff := cmp.Diff(want, lines[2:]); diff != "" {
			t.Errorf("fenced, delay %v (-want +got):\n%s", d, diff)
		}
	}
}
