package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/sitelink"
)

// startReference runs, on host i of the lab, the boot server siteboot is compared with:
// dnsmasq in proxy mode (with its own TFTP) and nginx serving a static iPXE script, the
// iPXE builds and the ramdisk.
func (l *lab) startReference(i int) *testpeer.Process {
	t := l.t
	t.Helper()
	testpeer.LookPath(t, "nginx", "nginx")
	h := l.seg.Hosts[i]
	dir := filepath.Join(l.dir, "reference")
	www := filepath.Join(dir, "www")
	for _, d := range []string{www, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kernel, initrd := testpeer.Ramdisk(t)
	base := "http://" + h.IP.String()
	files := map[string][]byte{
		"vmlinuz": kernel, "initrd.cpio": initrd,
		"boot.ipxe": []byte("#!ipxe\nkernel " + base + "/vmlinuz initrd=initrd.cpio console=ttyS0 panic=-1\ninitrd " + base + "/initrd.cpio\nboot\n"),
	}
	for _, name := range []string{"undionly.kpxe", "ipxe.efi"} {
		b, err := os.ReadFile(filepath.Join(l.tftpRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(www, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(dir, "tmp")
	conf := fmt.Sprintf(`daemon off;
master_process off;
user root;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log stderr;
events { worker_connections 64; }
http {
	access_log %[1]s/access.log;
	client_body_temp_path %[2]s; proxy_temp_path %[2]s; fastcgi_temp_path %[2]s;
	uwsgi_temp_path %[2]s; scgi_temp_path %[2]s;
	default_type application/octet-stream;
	server { listen %[3]s:80; root %[4]s; }
}
`, dir, tmp, h.IP, www)
	confFile := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	testpeer.Start(t, testpeer.Cmd{
		Path: "nginx", Args: []string{"-p", dir, "-e", "stderr", "-c", confFile},
		Netns: h.Netns, ReadyTCP: h.IP.String() + ":80",
	})
	script := base + "/boot.ipxe"
	return testpeer.Start(t, testpeer.Cmd{
		Path: "dnsmasq",
		Args: []string{
			"--no-daemon", "--conf-file=/dev/null", "--port=0", "--user=root", "--group=root",
			"--interface=" + h.Iface, "--bind-interfaces", "--log-dhcp", "--log-facility=-",
			"--dhcp-range=192.0.2.0,proxy",
			"--dhcp-userclass=set:ipxe,iPXE",
			"--pxe-service=tag:!ipxe,x86PC,siteboot-reference,undionly.kpxe",
			"--pxe-service=tag:ipxe,x86PC,siteboot-reference," + script,
			"--pxe-service=tag:!ipxe,X86-64_EFI,siteboot-reference,ipxe.efi",
			"--pxe-service=tag:ipxe,X86-64_EFI,siteboot-reference," + script,
			// UEFI HTTP boot: option 60 HTTPClient and the URL of ipxe.efi.
			"--dhcp-vendorclass=set:efihttp,HTTPClient",
			"--dhcp-option-force=tag:efihttp,60,HTTPClient",
			"--dhcp-boot=tag:efihttp," + base + "/ipxe.efi",
			"--enable-tftp", "--tftp-root=" + www,
			"--dhcp-leasefile=" + filepath.Join(dir, "dnsmasq.leases"),
			"--pid-file=" + filepath.Join(dir, "dnsmasq.pid"),
		},
		Netns: h.Netns, ReadyLog: `proxy on subnet`,
	})
}

// TestE2E_BenchFirmwareBoot times power-on to kernel start, for each firmware, through
// siteboot (siteagent) and through dnsmasq in proxy mode plus nginx, on two identical
// segments, one machine at a time, rounds interleaved. SITEBOOT_E2E_BENCH=N runs N rounds
// (SITEBOOT_E2E_BENCH_FW=bios, uefi-pxe or uefi-http only that firmware); bench/e2e/run.sh
// runs it.
func TestE2E_BenchFirmwareBoot(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("SITEBOOT_E2E_BENCH"))
	if rounds <= 0 {
		t.Skip("a timing comparison, not a test: set SITEBOOT_E2E_BENCH=ROUNDS (bench/e2e/run.sh)")
	}
	sb := newLab(t, 2)
	a := sb.startAgent("agent-a", 1)
	sb.waitActive(a)
	sb.waitReady(a.name)
	ref := newLab(t, 2)
	refDNS := ref.startReference(1)

	type key struct {
		fw     firmware
		server string
	}
	times := map[key][]time.Duration{}
	n := byte(0x40)
	for round := 1; round <= rounds; round++ {
		for _, fw := range []firmware{fwBIOS, fwUEFIPXE, fwUEFIHTTP} {
			if only := os.Getenv("SITEBOOT_E2E_BENCH_FW"); only != "" && only != string(fw) {
				continue
			}
			for _, server := range []string{"siteboot", "dnsmasq+nginx"} {
				n++
				l := sb
				if server != "siteboot" {
					l = ref
				}
				m := newMachine(fmt.Sprintf("%s-%s-%d", fw, strings.ReplaceAll(server, "+", "-"), round), fw, n)
				if l == sb {
					arch := sitelink.ArchX86UEFI
					if fw == fwBIOS {
						arch = sitelink.ArchBIOS
					}
					l.prepare(a.name, m, arch)
				}
				l.powerOn(m, bootOpts{rebootOnFail: true})
				m.wait(90*time.Second, kernelRE.Match)
				m.p.Stop()
				k := key{fw, server}
				if m.kernel.IsZero() {
					t.Logf("%s through %s: no kernel (round %d)", fw, server, round)
					if l == ref {
						said := grepLines(refDNS.Output(), m.mac.String(), 40)
						if said == "" {
							said = "(nothing: it never answered this machine)"
						}
						t.Logf("what the reference dnsmasq said of %s:\n%s", m.mac, said)
					}
					times[k] = append(times[k], -1)
					continue
				}
				d := m.kernel.Sub(m.start)
				m.logSlow(t, time.Minute)
				times[k] = append(times[k], d)
				t.Logf("%s through %s: power-on to kernel %v (round %d)", fw, server, d.Round(100*time.Millisecond), round)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "power-on to kernel start, %d rounds, median (min-max):\n", rounds)
	for _, fw := range []firmware{fwBIOS, fwUEFIPXE, fwUEFIHTTP} {
		if len(times[key{fw, "siteboot"}]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "  %-10s", fw)
		for _, server := range []string{"siteboot", "dnsmasq+nginx"} {
			fmt.Fprintf(&b, "  %s %s", server, summary(times[key{fw, server}]))
		}
		b.WriteString("\n")
	}
	t.Log(b.String())
}

// summary is "median (min-max)" of the durations; a failed boot (-1) shows as "failed".
func summary(ds []time.Duration) string {
	var ok []time.Duration
	failed := 0
	for _, d := range ds {
		if d < 0 {
			failed++
			continue
		}
		ok = append(ok, d)
	}
	if len(ok) == 0 {
		return fmt.Sprintf("no boot (%d failed)", failed)
	}
	slices.Sort(ok)
	s := fmt.Sprintf("%.1fs (%.1f-%.1f)", ok[len(ok)/2].Seconds(), ok[0].Seconds(), ok[len(ok)-1].Seconds())
	if failed > 0 {
		s += fmt.Sprintf(" %d failed", failed)
	}
	return s
}

// grepLines returns up to max lines of text that contain s.
func grepLines(text, s string, max int) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) && len(out) < max {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
