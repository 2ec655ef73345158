package e2e_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestE2E_BenchHTTPS times power-on to kernel start of machines booting through the agent's
// own iPXE builds, over https (boot certificate, plain HTTP refused) and over plain HTTP, on
// two identical segments, one machine at a time, rounds interleaved.
// SITEBOOT_E2E_BENCH_HTTPS=N runs N rounds; SITEBOOT_E2E_BENCH_HTTPS_FW names the path:
//
//	uefi-pxe   OVMF's PXE loads snponly.efi over TFTP (the default)
//	arm64-pxe  AAVMF's PXE loads the arm64 snponly.efi over TFTP
//	bios       SeaBIOS's iPXE ROM (Debian's, without HTTPS) chains undionly.kpxe over TFTP
//	           (repacked to trust the CA on the https side), through the site's DHCP
//	           server and a first script on both sides (newOwnBIOSLab), since proxy DHCP
//	           would hand the ROM itself a plain chain URL on the plain side
//	uefi-http  OVMF's UEFI HTTP boot fetches snponly.efi: over https with the CA enrolled
//	           (firmware_https) on the https side, over plain HTTP on the other
//	arm64-http the same with AAVMF and the arm64 snponly.efi
//
// SITEBOOT_E2E_BENCH_HTTPS_TRACE=1 also logs each machine's serial lines, each with the time it
// appeared after power-on, which splits a boot into its phases (firmware fetch, iPXE's start,
// scripts, kernel and initrd). bench/e2e/https.sh runs it.
func TestE2E_BenchHTTPS(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("SITEBOOT_E2E_BENCH_HTTPS"))
	if rounds <= 0 {
		t.Skip("a timing comparison, not a test: set SITEBOOT_E2E_BENCH_HTTPS=ROUNDS (bench/e2e/https.sh)")
	}
	fw := firmware(os.Getenv("SITEBOOT_E2E_BENCH_HTTPS_FW"))
	if fw == "" {
		fw = fwUEFIPXE
	}
	arch, limit, label := sitelink.ArchX86UEFI, 3*time.Minute, "OVMF PXE + snponly"
	switch fw {
	case fwUEFIPXE:
	case fwARM64PXE:
		arch, limit, label = sitelink.ArchARM64EFI, arm64BootTimeout, "AAVMF PXE + arm64 snponly"
	case fwBIOS:
		arch, label = sitelink.ArchBIOS, "SeaBIOS iPXE ROM + undionly.kpxe"
	case fwUEFIHTTP:
		label = "OVMF UEFI HTTP boot of snponly"
	case fwARM64HTTP:
		arch, limit, label = sitelink.ArchARM64EFI, arm64BootTimeout, "AAVMF UEFI HTTP boot of the arm64 snponly"
	default:
		t.Fatalf("SITEBOOT_E2E_BENCH_HTTPS_FW=%s: want %s, %s, %s, %s or %s", fw, fwUEFIPXE, fwARM64PXE, fwBIOS, fwUEFIHTTP, fwARM64HTTP)
	}
	// start sets up one side; its bootOpts enroll the https side's CA in the firmware for
	// UEFI HTTP boot over https.
	start := func(tlsOn bool) (*lab, *labAgent, bootOpts) {
		var l *lab
		var opts bootOpts
		scheme := map[bool]string{false: "http", true: "https"}[tlsOn]
		switch fw {
		case fwARM64PXE, fwARM64HTTP:
			l = newARM64Lab(t)
		case fwBIOS:
			l = newOwnBIOSLabScheme(t, map[bool]int{false: 29091, true: 29092}[tlsOn], scheme)
		default:
			l = newLab(t, 2)
			l.tftpRoot = "" // the agent's own builds on both
		}
		builds := &ipxebin.Builds{}
		if tlsOn {
			ip := l.seg.Hosts[1].IP
			ca := newBootCA(t, l.dir, "boot CA", net.IP(ip.AsSlice()))
			l.bootExtra = ca.bootTLSKeys()
			builds.CA = ca.cert
			if fw == fwUEFIHTTP || fw == fwARM64HTTP {
				l.bootExtra += "firmware_https = true\n"
				opts.httpsCACerts = efiSignatureList(ca.cert)
			}
		}
		if fw == fwBIOS { // the site's TFTP root: the build as the agent would serve it
			b, err := builds.ReadFile(ipxebin.UndionlyKPXE)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(l.tftpRoot, "undionly.kpxe"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		a := l.startAgent("agent-a", 1)
		l.waitActive(a)
		return l, a, opts
	}
	plainLab, plainAgent, plainOpts := start(false)
	tlsLab, tlsAgent, tlsOpts := start(true)

	trace := os.Getenv("SITEBOOT_E2E_BENCH_HTTPS_TRACE") != ""
	times := map[string][]time.Duration{}
	n := byte(0x60)
	for round := 1; round <= rounds; round++ {
		for _, path := range []string{"https", "http"} {
			n++
			l, a, opts := tlsLab, tlsAgent, tlsOpts
			if path == "http" {
				l, a, opts = plainLab, plainAgent, plainOpts
			}
			m := newMachine(fmt.Sprintf("bench-%s-%d", path, round), fw, n)
			l.prepare(a.name, m, arch)
			l.powerOn(m, opts)
			var stopTrace func() []serialStamp
			if trace {
				stopTrace = traceSerial(m.serial, m.start)
			}
			m.wait(limit, kernelRE.Match)
			m.p.Stop()
			if trace {
				for _, s := range stopTrace() {
					t.Logf("%s round %d trace %6.2fs %s", path, round, s.at.Seconds(), s.line)
				}
			}
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
	t.Logf("%s, power-on to kernel start, %d rounds, median (min-max): https %s, http %s, ratio https/http %s",
		label, rounds, summary(times["https"]), summary(times["http"]), ratio)
}
