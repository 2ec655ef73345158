package configfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/examples/siteagent/configfile"
)

// TestSecureBootKeys: boot.secure_boot, boot.shim and boot.grub reach the typed Config; -check
// refuses a Secure Boot site whose files are missing or named relatively, or that has no
// TFTP, naming the key.
func TestSecureBootKeys(t *testing.T) {
	base, err := os.ReadFile("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shim, grub := filepath.Join(dir, "shimx64.efi.signed"), filepath.Join(dir, "grubnetx64.efi.signed")
	for _, f := range []string{shim, grub} {
		if err := os.WriteFile(f, []byte("MZ"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	enable := func(shimPath, grubPath string) string {
		text := string(base)
		for _, kv := range [][2]string{
			{`# secure_boot = true`, `secure_boot = true`},
			{`# shim = "/usr/lib/shim/shimx64.efi.signed"`, `shim = "` + shimPath + `"`},
			{`# grub = "/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"`, `grub = "` + grubPath + `"`},
		} {
			if !strings.Contains(text, kv[0]) {
				t.Fatalf("example lacks %q", kv[0])
			}
			text = strings.Replace(text, kv[0], kv[1], 1)
		}
		return text
	}
	f, err := configfile.Parse(enable(shim, grub))
	if err != nil {
		t.Fatal(err)
	}
	if b := f.Agent.Boot; !b.SecureBoot || b.Shim != shim || b.GRUB != grub {
		t.Errorf("secure_boot %v, shim %q, grub %q", b.SecureBoot, b.Shim, b.GRUB)
	}
	for _, tc := range []struct {
		name, text, key string
	}{
		{"missing shim", enable(filepath.Join(dir, "none.efi"), grub), "boot.shim"},
		{"relative grub", enable(shim, "grubnetx64.efi.signed"), "boot.grub"},
		{"a directory as grub", enable(shim, dir), "boot.grub"},
		{"no tftp", strings.Replace(enable(shim, grub), `tftp        = true`, `tftp        = false`, 1), "boot.secure_boot"},
		{"no proxy dhcp", strings.Replace(enable(shim, grub), `proxy_dhcp  = true`, `proxy_dhcp  = false`, 1), "boot.secure_boot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := configfile.Parse(tc.text)
			var ke *configfile.KeyError
			if !errors.As(err, &ke) || ke.Key != tc.key {
				t.Errorf("Parse: %v; want a *KeyError for %s", err, tc.key)
			}
		})
	}
}
