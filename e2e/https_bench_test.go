package e2e_test

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/sitelink"
)

// TestE2E_BenchHTTPS times power-on to kernel start of OVMF PXE machines booting through
// the agent's own snponly build, over https (boot certificate, plain HTTP refused) and
// over plain HTTP, on two identical segments, one machine at a time, rounds interleaved.
// SITEBOOT_E2E_BENCH_HTTPS=N runs N rounds; bench/e2e/https.sh runs it.
func TestE2E_BenchHTTPS(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("SITEBOOT_E2E_BENCH_HTTPS"))
	if rounds <= 0 {
		t.Skip("a timing comparison, not a test: set SITEBOOT_E2E_BENCH_HTTPS=ROUNDS (bench/e2e/https.sh)")
	}
	start := func(tlsOn bool) (*lab, *labAgent) {
		l := newLab(t, 2)
		l.tftpRoot = "" // the agent's own builds on both
		if tlsOn {
			ip := l.seg.Hosts[1].IP
			l.bootExtra = newBootCA(t, l.dir, "boot CA", net.IP(ip.AsSlice())).bootTLSKeys()
		}
		a := l.startAgent("agent-a", 1)
		l.waitActive(a)
		return l, a
	}
	plainLab, plainAgent := start(false)
	tlsLab, tlsAgent := start(true)

	times := map[string][]time.Duration{}
	n := byte(0x60)
	for round := 1; round <= rounds; round++ {
		for _, path := range []string{"https", "http"} {
			n++
			l, a := tlsLab, tlsAgent
			if path == "http" {
				l, a = plainLab, plainAgent
			}
			m := newMachine(fmt.Sprintf("bench-%s-%d", path, round), fwUEFIPXE, n)
			l.prepare(a.name, m, sitelink.ArchX86UEFI)
			l.powerOn(m, bootOpts{})
			m.wait(3*time.Minute, kernelRE.Match)
			m.p.Stop()
			if m.kernel.IsZero() {
				t.Logf("%s: no kernel (round %d)", path, round)
				times[path] = append(times[path], -1)
				continue
			}
			d := m.kernel.Sub(m.start)
			times[path] = append(times[path], d)
			t.Logf("%s: power-on to kernel %v (round %d)", path, d.Round(100*time.Millisecond), round)
		}
	}
	med := func(ds []time.Duration) time.Duration {
		var ok []time.Duration
		for _, d := range ds {
			if d >= 0 {
				ok = append(ok, d)
			}
		}
		if len(ok) == 0 {
			return 0
		}
		for i := range ok { // insertion sort: a handful of rounds
			for j := i; j > 0 && ok[j] < ok[j-1]; j-- {
				ok[j], ok[j-1] = ok[j-1], ok[j]
			}
		}
		return ok[len(ok)/2]
	}
	h, p := med(times["https"]), med(times["http"])
	ratio := "n/a"
	if h > 0 && p > 0 {
		ratio = fmt.Sprintf("%.2f", h.Seconds()/p.Seconds())
	}
	t.Logf("OVMF PXE + snponly, power-on to kernel start, %d rounds, median (min-max): https %s, http %s, ratio https/http %s",
		rounds, summary(times["https"]), summary(times["http"]), ratio)
}
