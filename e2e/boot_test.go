package e2e_test

import (
	"testing"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
)

// bootOne runs one agent and one machine with a boot entry, and checks the boot end to end.
func bootOne(t *testing.T, fw firmware, i byte, arch string) (*lab, *labAgent, *machine) {
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine(string(fw), fw, i)
	l.prepare(a.name, m, arch)
	before := a.metrics()
	l.powerOn(m, bootOpts{})
	words := m.waitCmdline(t)
	t.Logf("%s: power-on to kernel %v, to the ramdisk's command line %v", m.name, m.kernel.Sub(m.start).Round(100_000_000), timeSince(m.start))
	l.checkBooted(m, words, a)
	l.checkCacheServed(m, words, a, before)
	return l, a, m
}

// TestE2E_BIOS: SeaBIOS with QEMU's iPXE ROM boots through proxy DHCP on port 67, the chain
// script and the machine's script, and the kernel and initrd from the agent's cache.
func TestE2E_BIOS(t *testing.T) {
	t.Parallel()
	_, a, _ := bootOne(t, fwBIOS, 1, agent.ArchBIOS)
	after := a.metrics()
	if n := after.sum("siteboot_proxydhcp_answered_total", `port="67"`); n < 1 {
		t.Errorf("proxy DHCP answered %v requests on port 67", n)
	}
}
