package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/secureboot"
)

// The signed chain's files, as Debian's packages ship them (dpkg -L shim-signed
// grub-efi-amd64-signed).
const (
	DefaultShim = secureboot.DefaultShim
	DefaultGRUB = secureboot.DefaultGRUB
)

// validateSecureBoot checks the Secure Boot keys: the file paths are absolute; with
// SecureBoot on, proxy DHCP and TFTP are on (everything of the chain is bound to the DHCP
// answer and fetched over TFTP) and both files are regular files (the command's -check).
// The files are checked by secureboot, whose FileError names the one at fault.
func (c *Config) validateSecureBoot() error {
	b := &c.Boot
	sc := secureboot.Config{Shim: b.Shim, GRUB: b.GRUB}
	var fe *secureboot.FileError
	if errors.As(sc.CheckPaths(), &fe) {
		return &FieldError{Field: "Boot." + fe.Field, Err: fe}
	}
	if !b.SecureBoot {
		return nil
	}
	if !b.ProxyDHCP {
		return &FieldError{Field: "Boot.SecureBoot", Err: errors.New("needs Boot.ProxyDHCP: the chain's files and its boot key are bound to this agent's DHCP answer")}
	}
	if !b.TFTP {
		return &FieldError{Field: "Boot.SecureBoot", Err: errors.New("needs Boot.TFTP: Debian's signed network GRUB fetches over TFTP only")}
	}
	if errors.As(sc.CheckFiles(), &fe) {
		return &FieldError{Field: "Boot." + fe.Field, Err: fe}
	}
	return nil
}

// setupSecureBoot builds the signed chain (package secureboot, DESIGN.md SB1) when the agent
// can serve it: proxy DHCP and TFTP on, and the files there. A missing file fails New only
// with Boot.SecureBoot; otherwise it is logged, and entries that ask for Secure Boot get
// silence. The chain's decision is the boot handler's (a.boot, set by bootServer).
func (a *Agent) setupSecureBoot() error {
	b := &a.cfg.Boot
	if !b.ProxyDHCP || !b.TFTP {
		return nil
	}
	bases := []string{a.cacheBase()}
	if u := a.httpBase + "/cache"; !slices.Contains(bases, u) && a.httpBase != "" {
		bases = append(bases, u)
	}
	c, err := secureboot.New(secureboot.Config{
		Shim: b.Shim, GRUB: b.GRUB, Server: b.ServerIP, HTTPPort: a.bases.HTTPPort,
		Nonces: a.nonces, Keys: bootbind.NewKeys(a.bindingConfig()),
		Decider: secureboot.DeciderFunc(func(ctx context.Context, q ipxe.Query) ipxe.Answer {
			return a.boot.Decide(ctx, q)
		}),
		CacheURLs: bases,
		OnFetch:   a.silent.Asked,
		OnIssue:   a.keeper.Wake,
		Clock:     a.clock,
		Logger:    a.log.With("component", "secureboot"),
	})
	if err != nil {
		if b.SecureBoot {
			return fmt.Errorf("agent: secure boot: %w", err)
		}
		a.log.Info("secure boot: the signed chain is not served; entries that ask for it get no answer", "err", err)
		return nil
	}
	if b.SecureBoot {
		// The site boots through the chain: a file GRUB or shim cannot be read from fails
		// the start rather than the first machine.
		if err := c.Load(); err != nil {
			c.Close()
			return fmt.Errorf("agent: secure boot: %w", err)
		}
	}
	a.sb, a.machines.SecureBoot = c, c // proxy DHCP names it to Secure Boot machines' firmware
	return nil
}
