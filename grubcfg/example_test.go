package grubcfg_test

import (
	"fmt"

	"github.com/bettercompute/siteboot/grubcfg"
)

// A site serves Chain's output where the signed GRUB looks (/grub/grub.cfg on its TFTP
// root), a KeyFile at the Chain's key URL, and answers each machine's request with Boot's.
// A Chain that gets no configuration after its last attempt boots the local disk.
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
	// echo 'siteboot: booting the local disk'
	// set siteboot_self="$root"
	// if search --no-floppy --file --set=root '/EFI/debian/grub.cfg'; then
	// 	configfile '/EFI/debian/grub.cfg'
	// fi
	// if search --no-floppy --file --set=root '/EFI/ubuntu/grub.cfg'; then
	// 	configfile '/EFI/ubuntu/grub.cfg'
	// fi
	// if search --no-floppy --file --set=root '/EFI/BOOT/BOOTX64.EFI'; then
	// 	if test "$root" != "$siteboot_self"; then
	// 		chainloader '/EFI/BOOT/BOOTX64.EFI'
	// 		boot
	// 	fi
	// fi
	// echo 'siteboot: no local disk to boot, leaving GRUB'
	// exit 1
	// grubcfg: params[bc.token]: single quote (GRUB quoting)
}
