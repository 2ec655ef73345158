package grubcfg

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/internal/bootscript"
)

// Defaults used when the corresponding field is zero.
const (
	// DefaultAttempts is how many times a configuration tries its fetch ([Retry.Attempts]).
	DefaultAttempts = bootscript.DefaultAttempts
	// MaxAttempts bounds [Retry.Attempts].
	MaxAttempts = bootscript.MaxAttempts
	// DefaultDelay is the first back-off ([Retry.Delay]); each further one doubles.
	DefaultDelay = bootscript.DefaultDelay
	// DefaultMaxDelay caps the back-off ([Retry.MaxDelay]).
	DefaultMaxDelay = bootscript.DefaultMaxDelay
	// MaxSleep bounds every sleep a configuration holds.
	MaxSleep = bootscript.MaxSleep
	// DefaultFencedDelay is how long the fenced configuration waits before it gives up (boots
	// the local disk).
	DefaultFencedDelay = bootscript.DefaultFencedDelay
	// DefaultWaitDelay is how long the wait-and-retry configuration sleeps.
	DefaultWaitDelay = bootscript.DefaultWaitDelay
)

// Param is one kernel command-line parameter, rendered as Name=Value. Name is
// [A-Za-z0-9][A-Za-z0-9._-]*; Value is printable ASCII without space, quotes, backslash or
// '$' (it may be empty). It is the type package ipxe renders too, so one entry's parameters
// serve both.
type Param = bootscript.Param

// Retry is the bounded back-off of a configuration's fetch: Attempts tries (1..MaxAttempts;
// 0 means DefaultAttempts), sleeping Delay (whole seconds; 0 means DefaultDelay) after the
// first failure, doubling up to MaxDelay (whole seconds, >= Delay; 0 means DefaultMaxDelay,
// or Delay if larger). It is the type package ipxe takes too.
type Retry = bootscript.Retry

// config accumulates the lines of one configuration; it writes the core's plans
// ([bootscript.Writer]).
type config struct{ b strings.Builder }

var _ bootscript.Writer = (*config)(nil)

func newConfig(comment string) *config {
	c := &config{}
	c.b.WriteString("# siteboot: ")
	c.b.WriteString(comment)
	c.b.WriteString("\nset timeout=0\n")
	return c
}

// line writes one line: indent, then words that are GRUB syntax already known to be safe.
func (c *config) line(indent int, words ...string) {
	c.b.WriteString(strings.Repeat("\t", indent))
	c.b.WriteString(strings.Join(words, " "))
	c.b.WriteByte('\n')
}

// quote single-quotes a value the caller has checked holds no single quote.
func quote(s string) string { return "'" + s + "'" }

// Label writes nothing: a failed GRUB command falls through to the next line.
func (c *config) Label(string) {}

// Echo writes echo 'siteboot: MSG'.
func (c *config) Echo(msg string) { c.line(0, "echo", quote("siteboot: "+msg)) }

// Sleep writes "sleep N".
func (c *config) Sleep(seconds int) { c.line(0, "sleep", strconv.Itoa(seconds)) }

// Again loads the configuration target; when that fails GRUB goes on with the next line.
func (c *config) Again(target string) { c.line(0, "configfile", quote(target)) }

// Reboot writes "reboot".
func (c *config) Reboot() { c.line(0, "reboot") }

// DiskLoader is where a configuration that gives up finds the local disk's loader (see
// [LocalBoot]): the x86-64 removable-media path, the loader a UEFI firmware boots from a
// disk without a Boot#### entry of its own (shim, on a disk installed for Secure Boot;
// Windows' boot manager).
const DiskLoader = "/EFI/BOOT/BOOTX64.EFI"

// DiskConfigs returns the GRUB configurations on an ESP that a configuration which gives up
// loads, the first found on any disk, before it tries [DiskLoader]: the ones the
// distributions whose signed GRUB boots through shim write (Debian's and Ubuntu's
// installers), in the order they are looked for. Each call returns a new slice.
func DiskConfigs() []string { return []string{"/EFI/debian/grub.cfg", "/EFI/ubuntu/grub.cfg"} }

// GiveUp boots the local disk, and leaves GRUB with "exit 1" only where no disk holds any
// of them. GRUB's own exit cannot be trusted to hand a failure back: Debian 12's shim and
// signed GRUB 2.06 return success, on which OVMF opens its Boot Manager instead of booting
// its next Boot#### entry (e2e TestE2E_SecureBootGRUBGiveUpReturnsToFirmware), so the
// configuration boots the disk itself.
//
// The signed network GRUB has the search, configfile, fat and chain modules built in, and
// loads none from the disk (Secure Boot): it reads the ESP's own configuration with them
// (which names the root file system and its /boot/grub/grub.cfg by itself, as the disk's
// own GRUB would), or chainloads the ESP's loader, which shim's protocol verifies (GRUB's
// shim_lock verifier checks a chainloaded image as it does a kernel) before the firmware
// starts it.
//
// The loader is not chainloaded from the device GRUB itself came from ($root before the
// search: "tftp,SERVER" after PXE, the RAM disk after UEFI HTTP boot, whose shim is
// EFI/BOOT/BOOTX64.EFI too): that would run the same network boot again, for ever. search
// names the first device that holds the file only, so when the RAM disk comes first the
// machine gets "exit 1" instead of the disk's loader (the ESP's configuration is still
// found: the RAM disk holds none).
func (c *config) GiveUp() {
	c.Echo("booting the local disk")
	c.line(0, "set", selfVar+`="$root"`)
	for _, p := range DiskConfigs() {
		c.line(0, "if", "search", "--no-floppy", "--file", "--set=root", quote(p)+";", "then")
		c.line(1, "configfile", quote(p))
		c.line(0, "fi")
	}
	c.line(0, "if", "search", "--no-floppy", "--file", "--set=root", quote(DiskLoader)+";", "then")
	c.line(1, "if", "test", `"$root"`, "!=", `"$`+selfVar+`";`, "then")
	c.line(2, "chainloader", quote(DiskLoader))
	c.line(2, "boot")
	c.line(1, "fi")
	c.line(0, "fi")
	c.Echo("no local disk to boot, leaving GRUB")
	c.line(0, "exit", "1")
}

func (c *config) bytes() []byte { return []byte(c.b.String()) }

// Boot is the machine's ramdisk configuration: load the kernel (which shim verifies) with
// the kernel command line, then the initrds, then boot, retrying the whole sequence with
// back-off. The command line is Params as Name=Value, then Cmdline; nothing in a value can
// add a parameter, a command or a line (see [ErrUnsafe]).
type Boot struct {
	Kernel  string   // http or tftp URL of the kernel
	Initrds []string // URLs of the initrds, in order (at most 16)
	Params  []Param  // the boot parameters (bc.*), rendered first; names unique
	Cmdline []string // the site's own command line, one token each ("console=ttyS0")

	Retry Retry
	// Again is the configuration loaded when every attempt failed, normally the agent's
	// per-machine URL again (when that fails too, the configuration waits 10 s and
	// reboots); empty means give up: boot the local disk as [Exit] does.
	Again string
	// MaxCmdline bounds the kernel command line in bytes; 0 means DefaultMaxCmdline.
	MaxCmdline int
}

// Render returns the configuration, or a [*ValueError] when a value is refused.
func (b Boot) Render() ([]byte, error) {
	kernel, err := grubPath("kernel", b.Kernel)
	if err != nil {
		return nil, err
	}
	if err := lang.CheckInitrds(len(b.Initrds)); err != nil {
		return nil, err
	}
	initrds := make([]string, len(b.Initrds))
	for i, u := range b.Initrds {
		if initrds[i], err = grubPath(fmt.Sprintf("initrds[%d]", i), u); err != nil {
			return nil, err
		}
	}
	args, err := lang.Cmdline(nil, b.Params, b.Cmdline, b.MaxCmdline)
	if err != nil {
		return nil, err
	}
	again := ""
	if b.Again != "" {
		if again, err = grubPath("again", b.Again); err != nil {
			return nil, err
		}
	}
	sleeps, err := lang.Sleeps(b.Retry)
	if err != nil {
		return nil, err
	}
	linux := make([]string, 0, len(args)+2)
	linux = append(linux, "if", "linux", quote(kernel))
	for _, a := range args {
		linux = append(linux, quote(a))
	}
	linux[len(linux)-1] += ";"
	linux = append(linux, "then")

	c := newConfig("boot the ramdisk")
	bootscript.Attempts(c, sleeps, again, func(string) {
		c.Echo("loading the kernel")
		c.line(0, linux...)
		depth := 1
		if len(initrds) > 0 {
			words := []string{"if", "initrd"}
			for _, p := range initrds {
				words = append(words, quote(p))
			}
			words[len(words)-1] += ";"
			c.line(1, append(words, "then")...)
			depth = 2
		}
		c.line(depth, "boot")
		for d := depth - 1; d >= 0; d-- {
			c.line(d, "fi")
		}
	})
	return c.bytes(), nil
}

// Chain leads GRUB to this machine's own configuration (served as /grub/grub.cfg over TFTP;
// see the package doc). It names the machine by the MAC and the SMBIOS system UUID, and
// presents the machine's boot key (n=KEY), which ties the request to what the site sent this
// machine and nobody else. It has two forms:
//
//   - Key empty, for a GRUB loaded over PXE: each attempt sources KeyURL?mac=MAC, a
//     [KeyFile] that sets siteboot_key, then loads URL?mac=MAC&uuid=UUID&n=${siteboot_key},
//     MAC being ${net_default_mac}, the NIC GRUB booted from (efinet makes it the default
//     interface).
//   - Key set, for the configuration a RAM disk carries to a GRUB that booted from that disk
//     (UEFI HTTP boot, see the package doc): GRUB configures no network when it did not
//     boot from one, so the configuration runs net_bootp first, then loads
//     URL?mac=MAC&uuid=UUID&n=KEY with the MAC and the key it was given.
//
// UUID is what GRUB's smbios command reads from type 1, offset 8, in its canonical spelling.
type Chain struct {
	URL    string // tftp or http URL of the machine's configuration, without a query
	KeyURL string // without Key: tftp or http URL of the key file, without a query
	Key    string // the boot key itself, 1 to MaxKeyLen of [A-Za-z0-9_-]
	MAC    string // with Key: the MAC, hex digits separated by ':' or '-'
	Retry  Retry
}

// Variables a Chain sets: the SMBIOS UUID (from GRUB's smbios command) and the boot key (from
// the key file).
const (
	uuidVar = "siteboot_uuid"
	keyVar  = "siteboot_key"
	selfVar = "siteboot_self" // the device GRUB came from, which a give-up does not chainload from
)

// MaxKeyLen bounds a boot key ([Chain.Key], [KeyFile.Key]).
const MaxKeyLen = 64

func checkKey(field, s string) error {
	if s == "" || len(s) > MaxKeyLen {
		return invalidErr(field, fmt.Sprintf("a boot key is 1 to %d characters", MaxKeyLen))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return unsafeErr(field, fmt.Sprintf("character %q is not allowed in a boot key", c))
		}
	}
	return nil
}

func checkMAC(field, s string) error {
	if s == "" || len(s) > 32 {
		return invalidErr(field, "want a MAC address")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c >= '0' && c <= '9' || c == ':' || c == '-') {
			return unsafeErr(field, fmt.Sprintf("character %q is not allowed in a MAC address", c))
		}
	}
	return nil
}

// chainURL checks a Chain URL: a GRUB file name without a query.
func chainURL(field, u string) (string, error) {
	p, err := grubPath(field, u)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(p, "?") {
		return "", invalidErr(field, "may not have a query")
	}
	return p, nil
}

// Render returns the configuration, or a [*ValueError] when a value is refused.
func (c Chain) Render() ([]byte, error) {
	p, err := chainURL("url", c.URL)
	if err != nil {
		return nil, err
	}
	var keyFile, mac, key string
	if c.Key == "" {
		if keyFile, err = chainURL("key_url", c.KeyURL); err != nil {
			return nil, err
		}
		mac, key = "${net_default_mac}", "${"+keyVar+"}"
	} else {
		if err := checkKey("key", c.Key); err != nil {
			return nil, err
		}
		if err := checkMAC("mac", c.MAC); err != nil {
			return nil, err
		}
		mac, key = c.MAC, c.Key
	}
	sleeps, err := lang.Sleeps(c.Retry)
	if err != nil {
		return nil, err
	}
	// Double quotes, so that GRUB expands the variables; p, mac and key hold no '"', '$' or
	// backslash (grubPath, checkMAC and checkKey refuse them), so nothing else in them is
	// special there.
	target := `"` + p + `?mac=` + mac + `&uuid=${` + uuidVar + `}&n=` + key + `"`
	cfg := newConfig("load this machine's configuration")
	if c.Key != "" {
		cfg.line(0, "net_bootp")
	}
	cfg.line(0, "smbios", "--type", "1", "--get-uuid", "8", "--set", uuidVar)
	bootscript.Attempts(cfg, sleeps, "", func(string) {
		if keyFile != "" {
			cfg.line(0, "unset", keyVar)
			cfg.line(0, "source", `"`+keyFile+`?mac=${net_default_mac}"`)
		}
		cfg.line(0, "configfile", target)
	})
	return cfg.bytes(), nil
}

// KeyFile is what a [Chain]'s key URL answers: a file GRUB sources, which sets the boot key
// the Chain then presents.
type KeyFile struct {
	Key string // 1 to MaxKeyLen of [A-Za-z0-9_-]
}

// Render returns the file, or a [*ValueError] for a bad key.
func (k KeyFile) Render() ([]byte, error) {
	if err := checkKey("key", k.Key); err != nil {
		return nil, err
	}
	return []byte("# siteboot: boot key\nset " + keyVar + "=" + quote(k.Key) + "\n"), nil
}

// Exit is the configuration for a machine without a boot entry (unknown, refused, a query
// that does not parse): boot the local disk the way [LocalBoot] does, at once, and leave
// GRUB with "exit 1" only when there is no disk to boot. A plain "exit 1" is not enough:
// with Debian 12's shim and signed GRUB 2.06 OVMF gets success from it and opens its menu
// (e2e TestE2E_SecureBootGRUBGiveUpReturnsToFirmware), as with Debian's 2019 iPXE.
type Exit struct{}

// Render returns the configuration; it never fails.
func (Exit) Render() ([]byte, error) {
	c := newConfig("no boot entry for this machine; booting the local disk")
	c.GiveUp()
	return c.bytes(), nil
}

// LocalBoot is the configuration for an entry that says "boot from the local disk", at
// once: the ESP's own GRUB configuration (the first of [DiskConfigs] found on a disk), else
// the ESP's default loader ([DiskLoader], chainloaded and verified through shim), else
// "exit 1" for the firmware's next boot option.
type LocalBoot struct{}

// Render returns the configuration; it never fails.
func (LocalBoot) Render() ([]byte, error) {
	c := newConfig("boot from the local disk")
	c.GiveUp()
	return c.bytes(), nil
}

// Fenced is the configuration a fenced boot server answers: wait, then boot the local disk
// as [Exit] does, instead of rebooting into the same network boot, which would come back
// here for as long as no agent is active. A failover within the wait is not reached by
// this configuration (GRUB does not ask again); the machine's next power-on is. Behind
// package bootserver a fenced agent's TFTP refuses GRUB's request before any answer is
// spelled, so there the [Chain]'s back-off is the wait, as it is for iPXE, and its give-up
// boots the disk the same way.
type Fenced struct {
	Delay time.Duration // whole seconds; 0 means DefaultFencedDelay
}

// Render returns the configuration, or a [*ValueError] for a bad Delay.
func (f Fenced) Render() ([]byte, error) { return render(lang.Fenced(f.Delay)) }

// Wait is the wait-and-retry configuration: sleep, then load URL again (normally the
// machine's own configuration); if that fails, wait 10 s and reboot.
type Wait struct {
	Delay time.Duration // whole seconds; 0 means DefaultWaitDelay
	URL   string
}

// Render returns the configuration, or a [*ValueError] when a value is refused.
func (w Wait) Render() ([]byte, error) {
	p, err := grubPath("url", w.URL)
	if err != nil {
		return nil, err
	}
	return render(lang.Wait(w.Delay, p))
}

// render writes a configuration the core planned.
func render(sc bootscript.Script, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	c := newConfig(sc.Comment)
	sc.Steps(c)
	return c.bytes(), nil
}
