package ipxe_test

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/bettercompute/siteboot/ipxe"
)

// shape is what a script must consist of: how many times each command appears and, for each
// command, the exact arguments it must have.
type shape struct {
	counts     map[string]int                 // command name -> exact number of occurrences
	args       map[string]func([]string) bool // command name -> does argv (without the name) fit
	expansions []string                       // the only ${...} allowed, in any token
}

// check parses script and verifies it has exactly this shape: only the listed commands,
// each with the listed arguments and the listed count; every goto names a label; no
// expansion but the allowed ones; after a fetch command only "|| goto LABEL".
func (sh shape) check(script []byte) error {
	lines, err := parseIPXE(script)
	if err != nil {
		return err
	}
	labels := map[string]bool{}
	for _, l := range lines {
		if l.Label != "" {
			if labels[l.Label] {
				return fmt.Errorf("label %q defined twice", l.Label)
			}
			labels[l.Label] = true
		}
	}
	counts := map[string]int{}
	for n, l := range lines {
		if l.Comment != "" && len(l.Cmds) > 0 {
			return fmt.Errorf("line %d: comment after a command", n+2)
		}
		for i, c := range l.Cmds {
			if len(c.Argv) == 0 {
				return fmt.Errorf("line %d: empty command", n+2)
			}
			for _, tok := range c.Argv {
				for _, e := range expansions(tok) {
					if !slices.Contains(sh.expansions, e) {
						return fmt.Errorf("line %d: unexpected expansion ${%s}", n+2, e)
					}
				}
			}
			name, args := c.Argv[0], c.Argv[1:]
			if name == "goto" {
				if len(args) != 1 || !labels[args[0]] {
					return fmt.Errorf("line %d: goto %q", n+2, args)
				}
				if i == 0 || l.Cmds[i-1].Sep != "||" || c.Sep != "" {
					return fmt.Errorf("line %d: goto not in the form A || goto L", n+2)
				}
				continue
			}
			if name == "isset" { // only as "isset X || ..."
				if len(args) != 1 || c.Sep != "||" {
					return fmt.Errorf("line %d: isset %q", n+2, args)
				}
			}
			if c.Sep == "&&" || c.Sep == ";" {
				return fmt.Errorf("line %d: separator %q", n+2, c.Sep)
			}
			if c.Sep == "||" && (i+1 >= len(l.Cmds) || (l.Cmds[i+1].Argv[0] != "goto" && name != "isset")) {
				return fmt.Errorf("line %d: %s || not followed by goto", n+2, name)
			}
			fit, ok := sh.args[name]
			if !ok {
				return fmt.Errorf("line %d: unexpected command %q", n+2, name)
			}
			if !fit(args) {
				return fmt.Errorf("line %d: %s %q: arguments not as given", n+2, name, args)
			}
			counts[name]++
		}
	}
	for name, want := range sh.counts {
		if counts[name] != want {
			return fmt.Errorf("%d %q commands, want %d", counts[name], name, want)
		}
	}
	for name := range counts {
		if _, ok := sh.counts[name]; !ok {
			return fmt.Errorf("command %q not expected", name)
		}
	}
	return nil
}

func exactly(want ...string) func([]string) bool {
	return func(got []string) bool { return slices.Equal(got, want) }
}

func anyArgs([]string) bool { return true }

func oneInt(args []string) bool {
	if len(args) != 1 {
		return false
	}
	n, err := strconv.Atoi(args[0])
	return err == nil && n > 0 && strconv.Itoa(n) == args[0]
}

func attemptsOf(r ipxe.Retry) int {
	if r.Attempts == 0 {
		return ipxe.DefaultAttempts
	}
	return r.Attempts
}

// fallback adds the commands that end every retrying script: with again, chain to it and,
// failing that, sleep and reboot; without, "exit 1".
func (sh shape) fallback(attempts int, again string) shape {
	sh.counts["echo"] += attempts // one per failed attempt but the last, one on giving up
	sh.counts["sleep"] += attempts - 1
	sh.args["echo"] = anyArgs
	sh.args["sleep"] = oneInt
	if again == "" {
		sh.counts["exit"]++
		sh.args["exit"] = exactly("1")
		return sh
	}
	sh.counts["sleep"]++
	sh.counts["reboot"]++
	sh.args["reboot"] = exactly()
	sh.counts["chain"]++
	sh.args["chain"] = exactly("--replace", "--autofree", again)
	return sh
}

// kernelArgs is the command line a Boot must give the kernel, word for word.
func kernelArgs(b ipxe.Boot) []string {
	var want []string
	for i := range b.Initrds {
		want = append(want, "initrd=initrd"+strconv.Itoa(i))
	}
	for _, p := range b.Params {
		want = append(want, p.Name+"="+p.Value)
	}
	return append(want, b.Cmdline...)
}

func bootShape(b ipxe.Boot) shape {
	n := attemptsOf(b.Retry)
	want := kernelArgs(b)
	sh := shape{
		counts: map[string]int{"imgfree": n, "kernel": n, "initrd": n * len(b.Initrds), "boot": n},
		args: map[string]func([]string) bool{
			"imgfree": exactly(),
			"boot":    exactly(),
			"kernel": func(args []string) bool {
				if len(args) == 0 || args[0] != b.Kernel || !slices.Equal(args[1:], want) {
					return false
				}
				// What Linux sees: iPXE joins the arguments with single spaces.
				words, err := linuxArgs(joinSpace(args[1:]))
				return err == nil && slices.Equal(words, want)
			},
			"initrd": func(args []string) bool {
				if len(args) != 3 || args[0] != "--name" || len(args[1]) <= len("initrd") {
					return false
				}
				i, err := strconv.Atoi(args[1][len("initrd"):])
				return err == nil && args[1] == "initrd"+strconv.Itoa(i) && i < len(b.Initrds) && args[2] == b.Initrds[i]
			},
		},
	}
	return sh.fallback(n, b.Again)
}

func sanbootShape(s ipxe.Sanboot) shape {
	n := attemptsOf(s.Retry)
	sh := shape{
		counts: map[string]int{"sanboot": n},
		args:   map[string]func([]string) bool{"sanboot": exactly("--no-describe", s.URL)},
	}
	return sh.fallback(n, s.Again)
}

func chainShape(c ipxe.Chain) shape {
	n := attemptsOf(c.Retry)
	dev := c.Interface
	if dev == "" {
		dev = ipxe.DefaultInterface
	}
	ipdev := dev
	if c.VLAN != 0 {
		ipdev = dev + "-" + strconv.Itoa(c.VLAN)
	}
	target := c.URL + "?mac=${" + dev + "/mac:hexhyp}&uuid=${uuid}&ip=${" + ipdev + "/ip}&platform=${platform}&buildarch=${buildarch}"
	if c.Nonce != "" {
		target += "&" + ipxe.ParamNonce + "=" + c.Nonce
	}
	sh := shape{
		counts:     map[string]int{},
		args:       map[string]func([]string) bool{},
		expansions: []string{dev + "/mac:hexhyp", "uuid", ipdev + "/ip", "platform", "buildarch"},
	}
	sh = sh.fallback(n, "")
	sh.counts["chain"] = n
	sh.args["chain"] = exactly("--replace", "--autofree", target)
	if c.VLAN != 0 {
		sh.expansions = append(sh.expansions, ipdev+"/mac", ipdev+"/ip")
		sh.counts["isset"] = n + 1
		sh.args["isset"] = func(a []string) bool {
			return slices.Equal(a, []string{"${" + ipdev + "/mac}"}) || slices.Equal(a, []string{"${" + ipdev + "/ip}"})
		}
		sh.counts["vcreate"] = 1
		sh.args["vcreate"] = exactly("--tag", strconv.Itoa(c.VLAN), dev)
		sh.counts["dhcp"] = n
		sh.args["dhcp"] = exactly(ipdev)
	}
	if c.Syslog.IsValid() {
		sh.counts["set"] = 1
		sh.args["set"] = exactly("syslog", c.Syslog.String())
	}
	return sh
}

func waitShape(w ipxe.Wait) shape {
	return shape{
		counts: map[string]int{"echo": 1, "sleep": 2, "chain": 1, "reboot": 1},
		args: map[string]func([]string) bool{
			"echo": anyArgs, "sleep": oneInt, "reboot": exactly(),
			"chain": exactly("--replace", "--autofree", w.URL),
		},
	}
}

func joinSpace(s []string) string {
	out := ""
	for i, w := range s {
		if i > 0 {
			out += " "
		}
		out += w
	}
	return out
}
