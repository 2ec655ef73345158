package agent

import (
	"time"

	"github.com/bettercompute/siteboot/bootbind"
)

// Bounds of the boot nonce store (package bootbind).
const (
	// DefaultNonceWindow is how long after its proxy DHCP answer a machine may fetch its
	// script with the answer's boot nonce (BootConfig.NonceWindow when zero).
	DefaultNonceWindow = bootbind.DefaultWindow
	// MaxNonces bounds the boot nonces held at once; the oldest give way first.
	MaxNonces = bootbind.DefaultMaxNonces
	// MaxNoncesPerMAC bounds the nonces one MAC holds.
	MaxNoncesPerMAC = bootbind.MaxNoncesPerMAC
	// NoncesFileName is the file in Config.DataDir that keeps the boot nonces across a
	// restart (bootbind.Keeper).
	NoncesFileName = "boot-nonces.json"
)

// nonceWindow is Boot.NonceWindow, or its default.
func (a *Agent) nonceWindow() time.Duration {
	if w := a.cfg.Boot.NonceWindow; w > 0 {
		return w
	}
	return DefaultNonceWindow
}

// The likely cause of a machine that proxy DHCP answered and that then asked the agent for
// nothing, as the log says it.
const silentCause = "the site's DHCP server may be offering its own boot file or HTTP boot URL; " +
	"see README, 'What the site's DHCP server must not send'"

// maxSilentWatch bounds the machines watched for silence, and those already named in the
// log.
const maxSilentWatch = 4096

// sweepSilent logs the machines that proxy DHCP answered and that then asked for nothing.
func (a *Agent) sweepSilent() {
	for _, mac := range a.silent.Sweep() {
		a.log.Warn("a machine proxy DHCP answered asked this agent for nothing", "mac", mac.String(),
			"window", a.nonceWindow(), "likely_cause", silentCause)
	}
}

// bindingConfig is the bootbind configuration of the agent's stores.
func (a *Agent) bindingConfig() bootbind.Config {
	return bootbind.Config{Window: a.cfg.Boot.NonceWindow, Clock: a.clock, Rand: a.opt.Rand}
}
