package agent

import (
	"testing"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/sitetls"
)

// TestOwnBootFiles: with the agent's own builds every UEFI arch is named its snponly build,
// and BIOS undionly.kpxe, over https too.
func TestOwnBootFiles(t *testing.T) {
	want := map[hwid.Arch]string{
		hwid.ArchX86_64EFI: ipxebin.SnponlyX8664, hwid.ArchEFIBC: ipxebin.SnponlyX8664, hwid.ArchX86_64EFIHTTP: ipxebin.SnponlyX8664,
		hwid.ArchARM64EFI: ipxebin.SnponlyARM64, hwid.ArchARM64EFIHTTP: ipxebin.SnponlyARM64,
	}
	for _, tlsOn := range []bool{false, true} {
		a := &Agent{}
		if tlsOn {
			a.bootTLS = &sitetls.Credentials{}
		}
		got := a.ownBootFiles()
		for arch, name := range want {
			if got.ByArch[arch] != name {
				t.Errorf("https %v: %v gets %q, want %q", tlsOn, arch, got.ByArch[arch], name)
			}
		}
		if bios, ok := got.ByArch[hwid.ArchBIOS]; !ok || bios != ipxebin.UndionlyKPXE {
			t.Errorf("https %v: BIOS gets %q (named %v)", tlsOn, bios, ok)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("https %v: %v", tlsOn, err)
		}
		// Every name in the table is a build the agent has.
		for arch, name := range got.ByArch {
			if _, err := (&ipxebin.Builds{}).ReadFile(name); err != nil {
				t.Errorf("https %v: %v gets %q, which is not embedded: %v", tlsOn, arch, name, err)
			}
		}
	}
}
