package grubcfg_test

import (
	"bufio"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/grubcfg"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

type renderer interface{ Render() ([]byte, error) }

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got):\n%s", name, diff)
	}
}

var site = grubcfg.Boot{
	Kernel:  "http://192.0.2.1/cache/t/0123456789abcdef0123456789abcdef/aa11",
	Initrds: []string{"http://192.0.2.1/cache/t/0123456789abcdef0123456789abcdef/bb22"},
	Params: []grubcfg.Param{
		{Name: "bc.gateway", Value: "https://cp.example.org:8443"},
		{Name: "bc.token", Value: "tok_3f9a"},
		{Name: "bc.assertion", Value: "AAEC-_x"},
	},
	Cmdline: []string{"console=ttyS0", "quiet"},
	Retry:   grubcfg.Retry{Attempts: 3},
	Again:   "http://192.0.2.1/boot/grub.cfg?mac=52-54-00-12-34-56",
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    renderer
	}{
		{"boot.cfg", site},
		{"boot-tftp-no-initrd.cfg", grubcfg.Boot{Kernel: "tftp://192.0.2.1/vmlinuz", Retry: grubcfg.Retry{Attempts: 1}}},
		{"chain.cfg", grubcfg.Chain{URL: "tftp://192.0.2.1/boot/grub.cfg", KeyURL: "tftp://192.0.2.1/sb/key", Retry: grubcfg.Retry{Attempts: 2, Delay: 5 * time.Second}}},
		{"chain-key.cfg", grubcfg.Chain{URL: "tftp://192.0.2.1/boot/grub.cfg", Key: "0123456789abcdef0123456789abcdef", MAC: "52:54:00:12:34:56", Retry: grubcfg.Retry{Attempts: 2}}},
		{"key.cfg", grubcfg.KeyFile{Key: "0123456789abcdef0123456789abcdef"}},
		{"exit.cfg", grubcfg.Exit{}},
		{"fenced.cfg", grubcfg.Fenced{}},
		{"local.cfg", grubcfg.LocalBoot{}},
		{"wait.cfg", grubcfg.Wait{URL: "http://boot.site.example/boot/grub.cfg?mac=52-54-00-12-34-56", Delay: 20 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.r.Render()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stepsGRUB(string(got)); err != nil {
				t.Fatalf("not well-formed: %v\n%s", err, got)
			}
			golden(t, tc.name, got)
		})
	}
}

// TestBootSteps reads the boot configuration as GRUB would and checks each attempt loads the
// kernel with exactly the given command line, then the initrd, then boots; and that nothing
// in it expands a variable.
func TestBootSteps(t *testing.T) {
	cfg, err := site.Render()
	if err != nil {
		t.Fatal(err)
	}
	if err := bootShape(site).check(cfg); err != nil {
		t.Fatalf("%v\n%s", err, cfg)
	}
}

func TestChainSteps(t *testing.T) {
	for _, c := range []grubcfg.Chain{
		{URL: "tftp://192.0.2.1/boot/grub.cfg", KeyURL: "tftp://192.0.2.1/sb/key"},
		{URL: "tftp://192.0.2.1/boot/grub.cfg", Key: "k-1_Z", MAC: "52-54-00-12-34-56", Retry: grubcfg.Retry{Attempts: 3}},
	} {
		cfg, err := c.Render()
		if err != nil {
			t.Fatal(err)
		}
		if err := chainShape(c).check(cfg); err != nil {
			t.Fatalf("%v\n%s", err, cfg)
		}
	}
	k := grubcfg.KeyFile{Key: "0123456789abcdef"}
	cfg, err := k.Render()
	if err != nil {
		t.Fatal(err)
	}
	if err := keyShape(k).check(cfg); err != nil {
		t.Fatalf("%v\n%s", err, cfg)
	}
}

// TestGiveUpBootsTheDisk: every configuration that gives up on the machine (no entry or a
// refusal, the fenced answer after its wait, the Chain after its last attempt) and the
// local-boot one boot the local disk themselves: the ESP's own GRUB configuration, else the
// ESP's default loader through shim, and "exit 1" only when no disk holds either. Debian
// 12's shim and signed GRUB 2.06 hand OVMF success for any exit, on which it opens its menu
// instead of its next boot option (e2e TestE2E_SecureBootGRUBGiveUpReturnsToFirmware), so
// an exit cannot be the way to the disk; nor can a reboot, which comes back to the same
// network boot. Nothing in them reboots.
func TestGiveUpBootsTheDisk(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    renderer
		sh   shape
	}{
		{"exit", grubcfg.Exit{}, exitShape()},
		{"local", grubcfg.LocalBoot{}, exitShape()},
		{"fenced", grubcfg.Fenced{}, fencedShape(grubcfg.Fenced{})},
		{"fenced 45 s", grubcfg.Fenced{Delay: 45 * time.Second}, fencedShape(grubcfg.Fenced{Delay: 45 * time.Second})},
		{"chain", grubcfg.Chain{URL: "tftp://192.0.2.1/boot/grub.cfg", KeyURL: "tftp://192.0.2.1/sb/key", Retry: grubcfg.Retry{Attempts: 2}},
			chainShape(grubcfg.Chain{URL: "tftp://192.0.2.1/boot/grub.cfg", KeyURL: "tftp://192.0.2.1/sb/key", Retry: grubcfg.Retry{Attempts: 2}})},
		{"boot without a fallback", grubcfg.Boot{Kernel: "tftp://192.0.2.1/k", Retry: grubcfg.Retry{Attempts: 1}},
			bootShape(grubcfg.Boot{Kernel: "tftp://192.0.2.1/k", Retry: grubcfg.Retry{Attempts: 1}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.r.Render()
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.sh.check(cfg); err != nil {
				t.Fatalf("%v\n%s", err, cfg)
			}
			steps, err := stepsGRUB(string(cfg))
			if err != nil {
				t.Fatal(err)
			}
			last := steps[len(steps)-1]
			if !slices.Equal(last.Argv, []string{"exit", "1"}) || last.Depth != 0 {
				t.Errorf("the last command is %q, want exit 1 outside every if", last.Argv)
			}
			disk := -1
			for i, s := range steps {
				if s.Argv[0] == "reboot" {
					t.Errorf("%s reboots", tc.name)
				}
				if s.Argv[0] == "search" && disk < 0 {
					disk = i
				}
			}
			// The disk's configuration is looked for before its loader, and both before the exit.
			if disk < 0 || !slices.Equal(steps[disk+1].Argv, []string{"configfile", grubcfg.DiskConfigs()[0]}) {
				t.Errorf("the give-up does not load the ESP's configuration first\n%s", cfg)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	long := strings.Repeat("a", grubcfg.MaxValueLen+1)
	for _, tc := range []struct {
		name  string
		r     renderer
		field string
		want  error
	}{
		{"https kernel", grubcfg.Boot{Kernel: "https://192.0.2.1/k"}, "kernel", grubcfg.ErrInvalid},
		{"a port GRUB cannot name", grubcfg.Boot{Kernel: "http://192.0.2.1:8080/k"}, "kernel", grubcfg.ErrInvalid},
		{"the protocol's own port", grubcfg.Boot{Kernel: "http://192.0.2.1:80/k", Initrds: []string{"tftp://192.0.2.1:70/i"}}, "initrds[0]", grubcfg.ErrInvalid},
		{"IPv6 host", grubcfg.Boot{Kernel: "http://[2001:db8::1]/k"}, "kernel", grubcfg.ErrInvalid},
		{"relative kernel", grubcfg.Boot{Kernel: "/vmlinuz"}, "kernel", grubcfg.ErrInvalid},
		{"quote in a URL", grubcfg.Boot{Kernel: "http://192.0.2.1/k'x"}, "kernel", grubcfg.ErrUnsafe},
		{"dollar in a URL", grubcfg.Boot{Kernel: "http://192.0.2.1/${root}"}, "kernel", grubcfg.ErrUnsafe},
		{"glob in a path", grubcfg.Boot{Kernel: "http://192.0.2.1/k*"}, "kernel", grubcfg.ErrUnsafe},
		{"quote in a value", grubcfg.Boot{Kernel: "http://192.0.2.1/k", Params: []grubcfg.Param{{Name: "bc.token", Value: "a'b"}}}, "params[bc.token]", grubcfg.ErrUnsafe},
		{"space in a value", grubcfg.Boot{Kernel: "http://192.0.2.1/k", Params: []grubcfg.Param{{Name: "bc.token", Value: "a b"}}}, "params[bc.token]", grubcfg.ErrUnsafe},
		{"long value", grubcfg.Boot{Kernel: "http://192.0.2.1/k", Params: []grubcfg.Param{{Name: "bc.token", Value: long}}}, "params[bc.token]", grubcfg.ErrUnsafe},
		{"bad name", grubcfg.Boot{Kernel: "http://192.0.2.1/k", Params: []grubcfg.Param{{Name: "-x", Value: ""}}}, "params[0]", grubcfg.ErrUnsafe},
		{"twice", grubcfg.Boot{Kernel: "http://192.0.2.1/k", Params: []grubcfg.Param{{Name: "bc.a"}, {Name: "bc.a"}}}, "params[bc.a]", grubcfg.ErrInvalid},
		{"cmdline sets a boot parameter", grubcfg.Boot{Kernel: "http://192.0.2.1/k", Cmdline: []string{"bc.token=x"}}, "cmdline[0]", grubcfg.ErrInvalid},
		{"empty token", grubcfg.Boot{Kernel: "http://192.0.2.1/k", Cmdline: []string{""}}, "cmdline[0]", grubcfg.ErrInvalid},
		{"command line too long", grubcfg.Boot{Kernel: "http://192.0.2.1/k", Cmdline: slices.Repeat([]string{strings.Repeat("x", 100)}, 21)}, "cmdline", grubcfg.ErrInvalid},
		{"attempts", grubcfg.Boot{Kernel: "http://192.0.2.1/k", Retry: grubcfg.Retry{Attempts: 17}}, "retry.attempts", grubcfg.ErrInvalid},
		{"fractional delay", grubcfg.Fenced{Delay: 1500 * time.Millisecond}, "delay", grubcfg.ErrInvalid},
		{"chain with a query", grubcfg.Chain{URL: "tftp://192.0.2.1/boot/grub.cfg?x=1", KeyURL: "tftp://192.0.2.1/sb/key"}, "url", grubcfg.ErrInvalid},
		{"chain without a key", grubcfg.Chain{URL: "tftp://192.0.2.1/boot/grub.cfg"}, "key_url", grubcfg.ErrInvalid},
		{"key URL with a query", grubcfg.Chain{URL: "tftp://192.0.2.1/boot/grub.cfg", KeyURL: "tftp://192.0.2.1/sb/key?mac=x"}, "key_url", grubcfg.ErrInvalid},
		{"a quote in a key", grubcfg.Chain{URL: "tftp://192.0.2.1/boot/grub.cfg", Key: "k'; reboot; '", MAC: "52:54:00:12:34:56"}, "key", grubcfg.ErrUnsafe},
		{"a key without a MAC", grubcfg.Chain{URL: "tftp://192.0.2.1/boot/grub.cfg", Key: "k"}, "mac", grubcfg.ErrInvalid},
		{"a variable as the MAC", grubcfg.Chain{URL: "tftp://192.0.2.1/boot/grub.cfg", Key: "k", MAC: "${root}"}, "mac", grubcfg.ErrUnsafe},
		{"a long key", grubcfg.KeyFile{Key: strings.Repeat("k", grubcfg.MaxKeyLen+1)}, "key", grubcfg.ErrInvalid},
		{"a space in a key file", grubcfg.KeyFile{Key: "a b"}, "key", grubcfg.ErrUnsafe},
		{"wait with a fragment", grubcfg.Wait{URL: "http://192.0.2.1/boot/grub.cfg#x"}, "url", grubcfg.ErrUnsafe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.r.Render()
			var ve *grubcfg.ValueError
			if !errors.As(err, &ve) || !errors.Is(err, tc.want) {
				t.Fatalf("Render() = %q, %v; want a *ValueError wrapping %v", out, err, tc.want)
			}
			if ve.Field != tc.field {
				t.Errorf("field %q, want %q", ve.Field, tc.field)
			}
		})
	}
}

func loadCorpus(tb testing.TB) []string {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "injection.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := strconv.Unquote(line)
		if err != nil {
			tb.Fatalf("injection.txt: %q: %v", line, err)
		}
		out = append(out, s)
	}
	return out
}

// TestInjectionCorpus puts every hostile string in every field: each is refused, or the
// configuration runs exactly the commands expected with exactly the given arguments.
func TestInjectionCorpus(t *testing.T) {
	rendered := 0
	for _, v := range loadCorpus(t) {
		for _, r := range hostile(v) {
			cfg, err := r.r.Render()
			if err != nil {
				if !errors.Is(err, grubcfg.ErrUnsafe) && !errors.Is(err, grubcfg.ErrInvalid) {
					t.Errorf("%T with %q: error %v is neither ErrUnsafe nor ErrInvalid", r.r, v, err)
				}
				continue
			}
			rendered++
			if err := r.shape().check(cfg); err != nil {
				t.Errorf("%T with %q: %v\n%s", r.r, v, err, cfg)
			}
		}
	}
	if rendered == 0 {
		t.Error("no case rendered: the corpus checks only refusals")
	}
}

type hostileCase struct {
	r     renderer
	shape func() shape
}

func hostile(v string) []hostileCase {
	k := "http://192.0.2.1/k"
	var out []hostileCase
	add := func(b grubcfg.Boot) { out = append(out, hostileCase{b, func() shape { return bootShape(b) }}) }
	add(grubcfg.Boot{Kernel: v})
	add(grubcfg.Boot{Kernel: k, Initrds: []string{v}})
	add(grubcfg.Boot{Kernel: k, Params: []grubcfg.Param{{Name: "bc.token", Value: v}}})
	add(grubcfg.Boot{Kernel: k, Params: []grubcfg.Param{{Name: v, Value: "x"}}})
	add(grubcfg.Boot{Kernel: k, Cmdline: []string{v}})
	add(grubcfg.Boot{Kernel: k, Again: v})
	add(grubcfg.Boot{Kernel: k + "/" + v})
	kf := "tftp://192.0.2.1/sb/key"
	for _, c := range []grubcfg.Chain{
		{URL: v, KeyURL: kf}, {URL: k + v, KeyURL: kf}, {URL: k, KeyURL: v},
		{URL: k, Key: v, MAC: "52:54:00:12:34:56"}, {URL: k, Key: "key", MAC: v},
	} {
		out = append(out, hostileCase{c, func() shape { return chainShape(c) }})
	}
	key := grubcfg.KeyFile{Key: v}
	out = append(out, hostileCase{key, func() shape { return keyShape(key) }})
	w := grubcfg.Wait{URL: v}
	out = append(out, hostileCase{w, func() shape { return waitShape(w) }})
	return out
}
