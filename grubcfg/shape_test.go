package grubcfg_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bettercompute/siteboot/grubcfg"
	"github.com/google/go-cmp/cmp"
)

// shape is what a configuration must run, read back with stepsGRUB: the commands in order
// with their arguments (echo lines are matched by name only), and the variables it may
// expand.
type shape struct {
	steps []grubStep
	vars  []string
}

func (s shape) check(cfg []byte) error {
	got, err := stepsGRUB(string(cfg))
	if err != nil {
		return fmt.Errorf("not well-formed: %v", err)
	}
	var vars []string
	for i := range got {
		vars = append(vars, got[i].Vars...)
		got[i].Vars = nil
		if got[i].Argv[0] == "echo" {
			got[i].Argv = got[i].Argv[:1]
		}
	}
	if diff := cmp.Diff(s.steps, got); diff != "" {
		return fmt.Errorf("commands differ (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(s.vars, vars); diff != "" {
		return fmt.Errorf("expansions differ (-want +got):\n%s", diff)
	}
	return nil
}

// grubName is the test's own reading of how a URL names a file in GRUB: "scheme://host/rest"
// becomes "(scheme,host)/rest", a default port dropped.
func grubName(u string) string {
	scheme, rest, _ := strings.Cut(u, "://")
	authority, path, _ := strings.Cut(rest, "/")
	host, _, _ := strings.Cut(authority, ":")
	return "(" + scheme + "," + host + ")/" + path
}

func attempts(r grubcfg.Retry) int {
	if r.Attempts == 0 {
		return grubcfg.DefaultAttempts
	}
	return r.Attempts
}

func echo(d int) grubStep { return grubStep{Depth: d, Argv: []string{"echo"}} }

func retrySteps(r grubcfg.Retry, again string, body func() []grubStep) []grubStep {
	n := attempts(r)
	var out []grubStep
	d := int(r.Delay.Seconds())
	if d == 0 {
		d = int(grubcfg.DefaultDelay.Seconds())
	}
	m := int(r.MaxDelay.Seconds())
	if m == 0 {
		m = max(int(grubcfg.DefaultMaxDelay.Seconds()), d)
	}
	for i := 1; i <= n; i++ {
		out = append(out, body()...)
		if i < n {
			out = append(out, echo(0), grubStep{Argv: []string{"sleep", strconv.Itoa(d)}})
			d = min(2*d, m)
		}
	}
	out = append(out, echo(0))
	if again == "" {
		return append(out, giveUpSteps()...)
	}
	out = append(out, grubStep{Argv: []string{"configfile", grubName(again)}})
	return append(out, grubStep{Argv: []string{"sleep", "10"}}, grubStep{Argv: []string{"reboot"}})
}

// giveUpSteps is how every configuration that gives up ends: the ESP's own GRUB
// configuration on whichever disk holds it, then the ESP's default loader through shim,
// and "exit 1" only after both.
func giveUpSteps() []grubStep {
	out := []grubStep{echo(0), {Argv: []string{"set", "siteboot_self=${root}"}}}
	for _, p := range []string{"/EFI/debian/grub.cfg", "/EFI/ubuntu/grub.cfg"} {
		out = append(out,
			grubStep{Argv: []string{"search", "--no-floppy", "--file", "--set=root", p}, Cond: true},
			grubStep{Depth: 1, Argv: []string{"configfile", p}})
	}
	return append(out,
		grubStep{Argv: []string{"search", "--no-floppy", "--file", "--set=root", "/EFI/BOOT/BOOTX64.EFI"}, Cond: true},
		grubStep{Depth: 1, Argv: []string{"test", "${root}", "!=", "${siteboot_self}"}, Cond: true},
		grubStep{Depth: 2, Argv: []string{"chainloader", "/EFI/BOOT/BOOTX64.EFI"}},
		grubStep{Depth: 2, Argv: []string{"boot"}},
		echo(0),
		grubStep{Argv: []string{"exit", "1"}})
}

// giveUpVars are the variables giveUpSteps expand, in order: GRUB's root, saved as the
// device GRUB came from, then compared with the device search found.
var giveUpVars = []string{"root", "root", "siteboot_self"}

func exitShape() shape {
	return shape{steps: append([]grubStep{{Argv: []string{"set", "timeout=0"}}}, giveUpSteps()...), vars: giveUpVars}
}

func fencedShape(f grubcfg.Fenced) shape {
	d := int(f.Delay.Seconds())
	if d == 0 {
		d = int(grubcfg.DefaultFencedDelay.Seconds())
	}
	steps := []grubStep{{Argv: []string{"set", "timeout=0"}}, echo(0), {Argv: []string{"sleep", strconv.Itoa(d)}}}
	return shape{steps: append(steps, giveUpSteps()...), vars: giveUpVars}
}

func bootShape(b grubcfg.Boot) shape {
	linux := []string{"linux", grubName(b.Kernel)}
	for _, p := range b.Params {
		linux = append(linux, p.Name+"="+p.Value)
	}
	linux = append(linux, b.Cmdline...)
	steps := []grubStep{{Argv: []string{"set", "timeout=0"}}}
	steps = append(steps, retrySteps(b.Retry, b.Again, func() []grubStep {
		out := []grubStep{echo(0), {Argv: linux, Cond: true}}
		depth := 1
		if len(b.Initrds) > 0 {
			initrd := []string{"initrd"}
			for _, u := range b.Initrds {
				initrd = append(initrd, grubName(u))
			}
			out = append(out, grubStep{Depth: 1, Argv: initrd, Cond: true})
			depth = 2
		}
		return append(out, grubStep{Depth: depth, Argv: []string{"boot"}})
	})...)
	if b.Again == "" {
		return shape{steps: steps, vars: giveUpVars}
	}
	return shape{steps: steps}
}

func chainShape(c grubcfg.Chain) shape {
	steps := []grubStep{{Argv: []string{"set", "timeout=0"}}}
	mac, key := "${net_default_mac}", "${siteboot_key}"
	if c.Key != "" {
		steps = append(steps, grubStep{Argv: []string{"net_bootp"}})
		mac, key = c.MAC, c.Key
	}
	steps = append(steps, grubStep{Argv: []string{"smbios", "--type", "1", "--get-uuid", "8", "--set", "siteboot_uuid"}})
	target := grubName(c.URL) + "?mac=" + mac + "&uuid=${siteboot_uuid}&n=" + key
	var vars []string
	steps = append(steps, retrySteps(c.Retry, "", func() []grubStep {
		var out []grubStep
		if c.Key == "" {
			out = append(out, grubStep{Argv: []string{"unset", "siteboot_key"}},
				grubStep{Argv: []string{"source", grubName(c.KeyURL) + "?mac=${net_default_mac}"}})
			vars = append(vars, "net_default_mac", "net_default_mac", "siteboot_uuid", "siteboot_key")
		} else {
			vars = append(vars, "siteboot_uuid")
		}
		return append(out, grubStep{Argv: []string{"configfile", target}})
	})...)
	return shape{steps: steps, vars: append(slices.Clip(vars), giveUpVars...)}
}

func keyShape(k grubcfg.KeyFile) shape {
	return shape{steps: []grubStep{{Argv: []string{"set", "siteboot_key=" + k.Key}}}}
}

func waitShape(w grubcfg.Wait) shape {
	d := int(w.Delay.Seconds())
	if d == 0 {
		d = int(grubcfg.DefaultWaitDelay.Seconds())
	}
	return shape{steps: []grubStep{
		{Argv: []string{"set", "timeout=0"}}, echo(0), {Argv: []string{"sleep", strconv.Itoa(d)}},
		{Argv: []string{"configfile", grubName(w.URL)}}, {Argv: []string{"sleep", "10"}}, {Argv: []string{"reboot"}},
	}}
}
