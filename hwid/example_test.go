package hwid_test

import (
	"fmt"

	"github.com/bettercompute/siteboot/hwid"
)

// A UUID from DHCP option 97, the one a BMC printed in SMBIOS byte order and the one IPMI
// printed fully reversed name the same machine, each held against any other; a firmware
// placeholder names none.
func Example() {
	fromDHCP, _ := hwid.ParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	fromBMC, _ := hwid.ParseUUID("44454C4C-3100-1035-8052-B4C04F4E4B32")
	fromIPMI, _ := hwid.ParseUUID("324b4e4f-c0b4-5280-1035-310044454c4c")
	placeholder, _ := hwid.ParseUUID("03000200-0400-0500-0006-000700080009")
	mac, _ := hwid.ParseMAC("3C-EC-EF-12-34-56")

	fmt.Println(hwid.SameMachine(fromDHCP, fromBMC))
	fmt.Println(hwid.SameMachine(fromBMC, fromIPMI))
	fmt.Println(hwid.SameMachine(placeholder, placeholder))
	fmt.Println(mac)
	// Output:
	// true
	// true
	// false
	// 3c:ec:ef:12:34:56
}
