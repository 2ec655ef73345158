package sitelink_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
)

// An agent keeps the entries a heartbeat's commands bring, and asks the entry of a MAC
// whether the machine asking is the one it names.
func ExampleEntryStore() {
	dir, _ := os.MkdirTemp("", "entries")
	defer os.RemoveAll(dir)
	clk := clocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	s, err := sitelink.OpenEntryStore(filepath.Join(dir, "boot-entries.json"), clk)
	if err != nil {
		fmt.Println(err)
		return
	}
	mac := hwid.MustParseMAC("52:54:00:12:34:56")
	_, err = s.Apply(sitelink.Command{ID: "c1", Kind: sitelink.KindPrepareRamdisk, Entries: []sitelink.ProxyDhcpEntry{{
		MAC: mac, UUID: "4c4c4544-0031-3510-8052-b4c04f4e4b32", Arch: sitelink.ArchX86UEFI,
		Workflow: "wf-1", NotAfter: clk.Now().Add(time.Hour),
	}}})
	fmt.Println(err, s.Writes())

	e, _ := s.LookupParsed(mac)
	fmt.Println(e.Match(hwid.ArchX86_64EFIHTTP, true, e.MachineUUID().SMBIOS()))
	fmt.Println(e.Match(hwid.ArchBIOS, true, hwid.UUID{}))
	fmt.Println(e.Match(0, false, hwid.MustParseUUID("8f1c0e2a-1b2c-4d5e-9f00-112233445566")))

	clk.Advance(time.Hour)
	_, live := s.Lookup(mac)
	fmt.Println(live)
	// Output:
	// <nil> 1
	// match
	// arch-mismatch
	// uuid-mismatch
	// false
}
