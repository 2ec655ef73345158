// Package ipmi is the bmc driver for IPMI 2.0 over LAN (RMCP+, "lanplus"), built on
// github.com/bougou/go-ipmi (pkg/client).
//
// # Wiring
//
//	reg.Register("ipmi", ipmi.Config{})                 // suites 17, then 3
//	d, err := reg.Open(ctx, bmc.Target{Driver: "ipmi", Address: "10.0.0.7", Username: u, Password: p})
//
// A Driver holds one session, opened by Dial and closed by Close (a second Close is a
// no-op; go-ipmi's own Close panics when called twice, so the driver never does).
// Requests on one Driver are serialised. Each request is sent once and again up to
// Config.Retries times when no answer comes within Config.Timeout; the context's deadline
// bounds the whole call.
//
// # What IPMI can and cannot do
//
// Power (Chassis Control), boot device (boot flags, parameter 5: PXE, disk, CD, BIOS
// setup; legacy or EFI; once or persistent), inspection (Get System GUID and the BMC's LAN
// MAC and address) and password rotation (Set User Password). IPMI has no way to list the
// host's NICs: Inventory.NICsKnown is false and NICs stays empty rather than guessed.
// There is no UEFI HTTP boot selector, no virtual media, firmware update or storage
// listing in standard IPMI: the driver does not implement those interfaces, and BootHTTP
// is ErrUnsupported.
//
// Power and boot changes are read back, as the Redfish driver does: after a power action
// the BMC accepted, the state is read until it is the one asked for (a graceful off
// included), for at most Config.PowerTimeout, else ErrTimeout; after a boot device change
// the boot flags are read, and a device other than the one asked for is ErrDiffers.
//
// # BMCs that do less
//
// A power cycle the BMC refuses (0xcc from virtualbmc and pyghmi, 0xd5, 0xd6) is sent as
// power down, a wait until the machine reports off (Config.CycleOffWait), then power up.
// Inspection reads the GUID, the LAN address and the LAN MAC each on its own: a part the
// BMC refuses (virtualbmc answers Get System GUID with 0xc1) is named in a
// *bmc.PartialError and the others are kept. virtualbmc answers success to BIOS setup and
// to no override and keeps the device it had: ErrDiffers, naming it.
//
// # GUID byte order
//
// Get System GUID returns 16 bytes. Inventory.UUIDRaw holds them as received;
// Inventory.UUID reads them in the SMBIOS order (first three fields little-endian), which
// is how BMCs that follow the SMBIOS and DCMI specifications store the system UUID, so it
// matches what the host's firmware reports (PXE option 97, dmidecode). ipmitool 1.8.19
// prints the raw bytes fully reversed (UUIDRaw.Reversed()). hwid.SameMachine compares
// spellings.
//
// # Cipher suites
//
// Config.CipherSuites are tried in order (default 17, then 3). Pin one for a BMC that
// cannot list its suites: OpenIPMI's ipmi_sim answers only suite 3 and never answers Get
// Channel Cipher Suites.
//
// # Accounts
//
// AddUser sets an account up in the order every BMC in the sources accepts: a free slot
// (never user 1, the anonymous user; "(Empty User)" is HPE's name for a free one), Set
// User Name and Set User Password before the user is enabled (Dell R420), the privilege
// before LAN messaging (Supermicro), Enable User, and Test Password last. RotatePassword
// reads the new password back with Test Password. bmc.NewPassword makes passwords every
// listed vendor policy accepts (Huawei refuses repeated characters); the test is
// TestQuirkIPMIUserSetupOrder, against ipmi_sim.
//
// # Errors
//
// Wrong user or password is bmc.ErrAuth; an address where nothing answers while the
// session is opened is bmc.ErrUnreachable; silence later is bmc.ErrTimeout; a completion
// code is bmc.ErrRefused (or ErrUnsupported for invalid-command codes) with the code in
// OpError.Code. A BMC out of sessions (RMCP+ status 0x01, or the 2-byte Open Session reply
// ipmi_sim sends then) is bmc.ErrNoSession.
//
// # Tests
//
// bmc/ipmi/ipmitest starts the real BMCs the tests use: OpenIPMI's ipmi_sim and pyghmi's
// BMC (Debian python3-pyghmi, the stack virtualbmc is built on). virtualbmc itself needs
// libvirtd and a QEMU domain; see ../shared/peers/README.md.
package ipmi
