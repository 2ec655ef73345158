package bootserver_test

import (
	"crypto/tls"
	"slices"
	"testing"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxebin"
)

// TestOwnBootFiles: with siteboot's own builds every UEFI arch is named its snponly build,
// and BIOS undionly.kpxe.
func TestOwnBootFiles(t *testing.T) {
	want := map[hwid.Arch]string{
		hwid.ArchX86_64EFI: ipxebin.SnponlyX8664, hwid.ArchEFIBC: ipxebin.SnponlyX8664, hwid.ArchX86_64EFIHTTP: ipxebin.SnponlyX8664,
		hwid.ArchARM64EFI: ipxebin.SnponlyARM64, hwid.ArchARM64EFIHTTP: ipxebin.SnponlyARM64,
	}
	got := bootserver.OwnBootFiles()
	for arch, name := range want {
		if got.ByArch[arch] != name {
			t.Errorf("%v gets %q, want %q", arch, got.ByArch[arch], name)
		}
	}
	if bios, ok := got.ByArch[hwid.ArchBIOS]; !ok || bios != ipxebin.UndionlyKPXE {
		t.Errorf("BIOS gets %q (named %v)", bios, ok)
	}
	if err := got.Validate(); err != nil {
		t.Error(err)
	}
	// Every name in the table is a build siteboot has.
	for arch, name := range got.ByArch {
		if _, err := (&ipxebin.Builds{}).ReadFile(name); err != nil {
			t.Errorf("%v gets %q, which is not embedded: %v", arch, name, err)
		}
	}
}

// TestFirmwareCipherSuites: the suites are Go's own (ECDHE first, as Go's server
// prefers) plus RSA key exchange with AES-GCM, and nothing Go would not speak.
func TestFirmwareCipherSuites(t *testing.T) {
	got := bootserver.FirmwareCipherSuites()
	for _, cs := range tls.CipherSuites() {
		if !slices.Contains(got, cs.ID) {
			t.Errorf("%s missing", cs.Name)
		}
	}
	for _, id := range []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_256_GCM_SHA384} {
		if !slices.Contains(got, id) {
			t.Errorf("%s missing", tls.CipherSuiteName(id))
		}
	}
	if n := len(tls.CipherSuites()) + 2; len(got) != n {
		t.Errorf("%d suites, want %d", len(got), n)
	}
}
