package ipxe

import (
	"fmt"
	"strconv"

	"github.com/bettercompute/siteboot/internal/bootscript"
)

// Boot is the machine's ramdisk boot script: fetch the kernel and its initrds, then boot,
// retrying the whole sequence with back-off.
//
// The kernel command line is, in order: one initrd=NAME per initrd (the name EFI stubs look
// for), Params as Name=Value, then Cmdline. Nothing in a value can add a parameter, a
// command or a line: see [ErrUnsafe].
type Boot struct {
	Kernel  string   // http, https or tftp URL of the kernel (or a path "/...")
	Initrds []string // URLs of the initrds, in order
	Params  []Param  // the boot parameters (bc.*), rendered first; names unique
	Cmdline []string // the site's own command line, one token each ("console=ttyS0", "quiet")

	Retry Retry
	// Again is the URL chained when every attempt failed, normally /boot/chain.ipxe so the
	// machine asks for a fresh script (when that chain fails, the script waits 10 s and
	// reboots); empty means give up with "exit 1".
	Again string
	// MaxCmdline bounds the kernel command line in bytes; 0 means DefaultMaxCmdline.
	MaxCmdline int
}

// Render returns the script, or a [*ValueError] when a value is refused.
func (b Boot) Render() ([]byte, error) {
	if _, err := checkURL("kernel", b.Kernel, true); err != nil {
		return nil, err
	}
	if err := lang.CheckInitrds(len(b.Initrds)); err != nil {
		return nil, err
	}
	lead := make([]string, len(b.Initrds))
	names := make([]string, len(b.Initrds))
	for i, u := range b.Initrds {
		if _, err := checkURL(fmt.Sprintf("initrds[%d]", i), u, true); err != nil {
			return nil, err
		}
		names[i] = "initrd" + strconv.Itoa(i)
		lead[i] = "initrd=" + names[i]
	}
	args, err := lang.Cmdline(lead, b.Params, b.Cmdline, b.MaxCmdline)
	if err != nil {
		return nil, err
	}
	if b.Again != "" {
		if _, err := checkURL("again", b.Again, true); err != nil {
			return nil, err
		}
	}
	sleeps, err := lang.Sleeps(b.Retry)
	if err != nil {
		return nil, err
	}

	per := bootscript.Length(args) + len(b.Kernel) + 160 // imgfree, kernel, boot, echo and sleep lines
	for _, u := range b.Initrds {
		per += len(u) + 48
	}
	s := newScript("boot the ramdisk", (len(sleeps)+1)*per)
	bootscript.Attempts(s, sleeps, b.Again, func(onFail string) {
		s.line("imgfree")
		kernel := make([]string, 0, len(args)+5)
		kernel = append(kernel, "kernel", b.Kernel)
		kernel = append(kernel, args...)
		s.line(append(kernel, "||", "goto", onFail)...)
		for i, u := range b.Initrds {
			s.line("initrd", "--name", names[i], u, "||", "goto", onFail)
		}
		s.line("boot", "||", "goto", onFail)
	})
	return s.bytes(), nil
}

// Sanboot is the script that boots an ISO over HTTP with range requests
// (sanboot --no-describe URL), retrying with back-off.
type Sanboot struct {
	URL   string // http or https URL of the ISO (a cache grant URL)
	Retry Retry
	Again string // chained when every attempt failed (failing that: wait 10 s, reboot); empty: exit 1
}

// Render returns the script, or a [*ValueError] when a value is refused.
func (b Sanboot) Render() ([]byte, error) {
	u, err := checkURL("url", b.URL, true)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "tftp" {
		return nil, invalidErr("url", "sanboot needs http or https (range requests)")
	}
	if b.Again != "" {
		if _, err := checkURL("again", b.Again, true); err != nil {
			return nil, err
		}
	}
	sleeps, err := lang.Sleeps(b.Retry)
	if err != nil {
		return nil, err
	}
	s := newScript("boot the ISO from the site cache", (len(sleeps)+1)*(len(b.URL)+120))
	bootscript.Attempts(s, sleeps, b.Again, func(onFail string) {
		s.line("sanboot", "--no-describe", b.URL, "||", "goto", onFail)
	})
	return s.bytes(), nil
}
