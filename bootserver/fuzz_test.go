package bootserver_test

import (
	"io"
	"io/fs"
	"net/netip"
	"testing"
	"testing/fstest"

	"github.com/bettercompute/siteboot/bootserver"
)

// FuzzFS opens any TFTP name a machine may send: the file system never panics, and what it
// serves is one of its files, under the name it is served by.
func FuzzFS(f *testing.F) {
	files := map[string]string{"ipxe.efi": "ipxe", "efi64/snp.efi": "snp", "t/g/d": "granted", "grub/grub.cfg": "grub"}
	fsys := bootserver.FS{
		Builds: fstest.MapFS{"ipxe.efi": {Data: []byte("ipxe")}, "efi64/snp.efi": {Data: []byte("snp")}},
		Grants: fstest.MapFS{"t/g/d": {Data: []byte("granted")}},
		Mounts: map[string]fs.FS{"grub": fstest.MapFS{"grub.cfg": {Data: []byte("grub")}}},
	}
	for _, s := range []string{"ipxe.efi", "efi64/snp.efi", "t/g/d", "grub/grub.cfg", "grub/../ipxe.efi", "/ipxe.efi",
		"t/../ipxe.efi", ".", "", "grub", "t", "efi64/", "ipxe.efi\x00", "grub//grub.cfg"} {
		f.Add(s)
	}
	peer := netip.MustParseAddrPort("192.0.2.11:1024")
	f.Fuzz(func(t *testing.T, name string) {
		for _, open := range []func(string) (fs.File, error){fsys.Open, func(n string) (fs.File, error) { return fsys.OpenFrom(n, peer) }} {
			file, err := open(name)
			if err != nil {
				continue
			}
			st, err := file.Stat()
			if err != nil {
				t.Fatalf("Stat(%q): %v", name, err)
			}
			if st.IsDir() {
				file.Close()
				continue
			}
			b, _ := io.ReadAll(file)
			file.Close()
			if want, ok := files[name]; !ok || string(b) != want {
				t.Fatalf("Open(%q) served %q", name, b)
			}
		}
	})
}
