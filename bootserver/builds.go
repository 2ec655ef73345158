package bootserver

import (
	"crypto/tls"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/proxydhcp"
)

// OwnBootFiles is proxy DHCP's table (proxydhcp.Server.BootFiles) for siteboot's own iPXE
// builds (package ipxebin): snponly for x86-64 and arm64 UEFI (PXE and HTTP boot: the
// firmware's network stack, which works where iPXE's own drivers fail on some NICs), and
// undionly.kpxe for BIOS. Every one of them speaks https and is served trusting the site CA
// (ipxebin repacks the compressed BIOS build for it), so the table is the same with an
// HTTPS boot server or without; with one, set proxydhcp.Server.UpgradeIPXE too, so that a
// NIC ROM's iPXE without TLS is handed its architecture's build before the chain.
func OwnBootFiles() proxydhcp.BootFiles {
	t := proxydhcp.DefaultBootFiles()
	t.ByArch = map[hwid.Arch]string{
		hwid.ArchX86_64EFI:     ipxebin.SnponlyX8664,
		hwid.ArchEFIBC:         ipxebin.SnponlyX8664,
		hwid.ArchX86_64EFIHTTP: ipxebin.SnponlyX8664,
		hwid.ArchARM64EFI:      ipxebin.SnponlyARM64,
		hwid.ArchARM64EFIHTTP:  ipxebin.SnponlyARM64,
		hwid.ArchBIOS:          ipxebin.UndionlyKPXE,
	}
	return t
}

// FirmwareCipherSuites are the TLS 1.2 cipher suites of a boot server whose HTTPS side
// UEFI firmware fetches from (Config.TLS's CipherSuites): Go's ECDHE suites, which iPXE and
// any client that offers them get (Go's server prefers them), and the two RSA key exchange
// suites with AES-GCM, the best that EDK2 firmware of 2022 offers besides DHE, which Go
// does not implement (OVMF 2022.11 offers DHE and RSA key exchange only). RSA key exchange
// has no forward secrecy; a client gets it only when it offers nothing better, and the
// firmware fetches over it the iPXE build, which holds no secret.
func FirmwareCipherSuites() []uint16 {
	var out []uint16
	for _, cs := range tls.CipherSuites() {
		out = append(out, cs.ID)
	}
	return append(out, tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_256_GCM_SHA384)
}
