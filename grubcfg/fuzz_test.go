package grubcfg_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/grubcfg"
)

// FuzzRender puts arbitrary values in every field of every configuration kind: the renderer
// either refuses with a *ValueError, or GRUB would run exactly the commands expected with
// exactly the given arguments and expand nothing it was not told to.
func FuzzRender(f *testing.F) {
	corpus := loadCorpus(f)
	for i, v := range corpus {
		f.Add(v, corpus[(i+1)%len(corpus)], "bc.token", "console=ttyS0", uint8(i%4))
	}
	f.Add("http://192.0.2.1/vmlinuz", "http://192.0.2.1/initrd.img", "bc.x", "quiet", uint8(2))
	f.Fuzz(func(t *testing.T, url, value, name, token string, n uint8) {
		retry := grubcfg.Retry{Attempts: int(n % 5)}
		var cases []hostileCase
		b := grubcfg.Boot{
			Kernel:  url,
			Initrds: []string{"http://192.0.2.1/initrd.img", value},
			Params:  []grubcfg.Param{{Name: name, Value: value}, {Name: "bc.assertion", Value: token}},
			Cmdline: []string{token, "quiet"},
			Retry:   retry,
			Again:   value,
		}
		cases = append(cases, hostileCase{b, func() shape { return bootShape(b) }})
		c := grubcfg.Chain{URL: url, KeyURL: value, Retry: retry}
		cases = append(cases, hostileCase{c, func() shape { return chainShape(c) }})
		ck := grubcfg.Chain{URL: url, Key: token, MAC: name, Retry: retry}
		cases = append(cases, hostileCase{ck, func() shape { return chainShape(ck) }})
		kf := grubcfg.KeyFile{Key: token}
		cases = append(cases, hostileCase{kf, func() shape { return keyShape(kf) }})
		w := grubcfg.Wait{URL: value}
		cases = append(cases, hostileCase{w, func() shape { return waitShape(w) }})
		for _, tc := range cases {
			cfg, err := tc.r.Render()
			if err != nil {
				var ve *grubcfg.ValueError
				if !errors.As(err, &ve) || !(errors.Is(err, grubcfg.ErrUnsafe) || errors.Is(err, grubcfg.ErrInvalid)) {
					t.Fatalf("%T: error %v is not a *ValueError", tc.r, err)
				}
				continue
			}
			if err := tc.shape().check(cfg); err != nil {
				t.Fatalf("%T rendered a configuration that is not as given: %v\n%s", tc.r, err, cfg)
			}
		}
	})
}

// TestCheckerCatches: the reading in grammar_test.go sees what a careless renderer would let
// through, so that the shape checks above can fail.
func TestCheckerCatches(t *testing.T) {
	b := grubcfg.Boot{Kernel: "http://192.0.2.1/k", Params: []grubcfg.Param{{Name: "bc.token", Value: "x"}}, Retry: grubcfg.Retry{Attempts: 1}}
	good, err := b.Render()
	if err != nil {
		t.Fatal(err)
	}
	if err := bootShape(b).check(good); err != nil {
		t.Fatalf("the checker refuses the renderer's own output: %v", err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"a quote closed early", "'bc.token=x'", "'bc.token=x'; reboot; 'y'"},
		{"a new line", "'bc.token=x'", "'bc.token=x\nreboot'"},
		{"a variable in double quotes", "'bc.token=x'", `"bc.token=${root}"`},
		{"an unquoted variable", "'bc.token=x'", "bc.token=$root"},
		{"a glob", "'bc.token=x'", "bc.token=*"},
		{"a comment", "'bc.token=x'", "#bc.token=x"},
		{"an extra word", "'bc.token=x'", "'bc.token=x' 'init=/bin/sh'"},
		{"a block", "'bc.token=x'", "'bc.token=x' { reboot }"},
		{"a pipe", "'bc.token=x'", "'bc.token=x' | reboot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tc.from, tc.to, 1)
			if bad == string(good) {
				t.Fatal("the substitution did not apply")
			}
			if err := bootShape(b).check([]byte(bad)); err == nil {
				t.Errorf("the checker accepted:\n%s", bad)
			}
		})
	}
}
