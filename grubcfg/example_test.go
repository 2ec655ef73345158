package grubcfg_test

import (
	"fmt"

	"github.com/bettercompute/siteboot/grubcfg"
)

// A site serves Chain's output where the signed GRUB looks (/grub/grub.cfg on its TFTP
// root), a KeyFile at the Chain's key URL, and answers each machine's request with Boot's.
func Example() {
	chain, err := grubcfg.Chain{
		URL:    "tftp://192.0.2.1/boot/grub.cfg",
		KeyURL: "tftp://192.0.2.1/sb/key",
		Retry:  grubcfg.Retry{Attempts: 1},
	}.Render()
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s", chain)

	_, err = grubcfg.Boot{
		Kernel: "tftp://192.0.2.1/cache/t/GRANT/SHA",
		Params: []grubcfg.Param{{Name: "bc.token", Value: "x' ; reboot ; '"}},
	}.Render()
	fmt.Println(err)
	// Output:
	// # siteboot: load this machine's configuration
	// set timeout=0
	// smbios --type 1 --get-uuid 8 --set siteboot_uuid
	// unset siteboot_key
	// source "(tftp,192.0.2.1)/sb/key?mac=${net_default_mac}"
	// configfile "(tftp,192.0.2.1)/boot/grub.cfg?mac=${net_default_mac}&uuid=${siteboot_uuid}&n=${siteboot_key}"
	// echo 'siteboot: giving up after 1 attempts'
	// sleep 10
	// reboot
	// grubcfg: params[bc.token]: single quote (GRUB quoting)
}
