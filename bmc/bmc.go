package bmc

import (
	"context"
	"net/netip"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// Target says which BMC to open and how: what the host's inventory holds for one machine.
type Target struct {
	// Driver is the registry name of the driver, e.g. "redfish" or "ipmi".
	Driver string
	// Address is the BMC's address: a host or host:port (IPMI's default port is 623), or a
	// URL for Redfish (https://host[:port]; a bare host means https).
	Address string
	// Username and Password are the BMC credentials. They are never logged.
	Username string
	Password string
	// CertSHA256 pins the BMC's TLS leaf certificate by the SHA-256 of its DER bytes (32
	// bytes). When set, the pinned certificate is accepted whoever issued it and nothing else
	// is; this is how a BMC with a self-signed certificate is trusted. Redfish only.
	CertSHA256 []byte
	// Insecure skips TLS verification for this target alone. Only when the operator asks.
	Insecure bool
}

// Opener opens a driver for a target. Each driver package's Config implements it.
type Opener interface {
	Open(ctx context.Context, t Target) (Driver, error)
}

// OpenerFunc adapts a function to Opener.
type OpenerFunc func(ctx context.Context, t Target) (Driver, error)

// Open calls f(ctx, t).
func (f OpenerFunc) Open(ctx context.Context, t Target) (Driver, error) { return f(ctx, t) }

// Driver is an open connection to one BMC. Its optional capabilities are the interfaces
// below; assert for the ones an operation needs.
type Driver interface {
	// Name is the driver's protocol name ("redfish", "ipmi").
	Name() string
	// Close ends the session with the BMC (a Redfish logout, an IPMI Close Session) and
	// releases the connection. It is bounded by the driver's timeout; a second Close is a
	// no-op that returns nil.
	Close() error
}

// PowerState is a machine's power state as its BMC reports it.
type PowerState string

// Power states.
const (
	PowerOn      PowerState = "on"
	PowerOff     PowerState = "off"
	PowerUnknown PowerState = "unknown" // powering on or off, or a state the BMC did not name
)

// PowerAction is a power operation.
type PowerAction string

// Power actions.
const (
	PowerActionOn       PowerAction = "on"
	PowerActionOff      PowerAction = "off"       // graceful: ask the OS to shut down (ACPI)
	PowerActionForceOff PowerAction = "force-off" // cut power now
	PowerActionCycle    PowerAction = "cycle"     // off, then on
	PowerActionReset    PowerAction = "reset"     // hard reset without a power transition
)

// Valid reports whether a is one of the PowerAction constants.
func (a PowerAction) Valid() bool {
	switch a {
	case PowerActionOn, PowerActionOff, PowerActionForceOff, PowerActionCycle, PowerActionReset:
		return true
	}
	return false
}

// PowerController reads and changes power.
type PowerController interface {
	PowerState(ctx context.Context) (PowerState, error)
	// SetPower returns once the machine reports the state asked for (on after on, cycle
	// and reset; off after off and force-off, a graceful off included), read back until
	// the driver's power timeout: a machine that does not get there is ErrTimeout, saying
	// what it reports. Both drivers keep this contract.
	SetPower(ctx context.Context, a PowerAction) error
}

// BootTarget is a boot device class.
type BootTarget string

// Boot targets.
const (
	BootNone      BootTarget = "none" // clear any override
	BootPXE       BootTarget = "pxe"
	BootHTTP      BootTarget = "http" // UEFI HTTP boot
	BootCD        BootTarget = "cd"   // includes virtual media
	BootDisk      BootTarget = "disk"
	BootBIOSSetup BootTarget = "bios-setup"
)

// BootMode chooses the firmware path for the boot.
type BootMode string

// Boot modes.
const (
	BootModeAuto   BootMode = "" // leave the BMC's current mode
	BootModeUEFI   BootMode = "uefi"
	BootModeLegacy BootMode = "legacy"
)

// BootDevice is a boot override.
type BootDevice struct {
	Target BootTarget
	Mode   BootMode
	// Persistent keeps the override for every boot; false applies it to the next boot only.
	Persistent bool
}

// Validate reports an ErrInvalid error for a target, mode or combination no BMC accepts.
func (b BootDevice) Validate() error {
	switch b.Target {
	case BootNone, BootPXE, BootCD, BootDisk, BootBIOSSetup:
	case BootHTTP:
		if b.Mode == BootModeLegacy {
			return &OpError{Op: "set-boot", Kind: ErrInvalid, Message: "UEFI HTTP boot needs UEFI mode"}
		}
	default:
		return &OpError{Op: "set-boot", Kind: ErrInvalid, Message: "unknown boot target " + quote(string(b.Target))}
	}
	switch b.Mode {
	case BootModeAuto, BootModeUEFI, BootModeLegacy:
	default:
		return &OpError{Op: "set-boot", Kind: ErrInvalid, Message: "unknown boot mode " + quote(string(b.Mode))}
	}
	return nil
}

// BootController sets the boot device.
type BootController interface {
	// SetBootDevice sets the override and reads it back: a BMC that answered success but
	// kept something else is ErrDiffers, saying what it kept. A mode or target the BMC
	// cannot give is ErrUnsupported, and an explicit mode is never dropped.
	SetBootDevice(ctx context.Context, b BootDevice) error
}

// NIC is a host network interface the BMC reported.
type NIC struct {
	MAC hwid.MAC
	// Name is the BMC's id for the interface (a Redfish resource id, for instance).
	Name string
	// Source says where it was found: "EthernetInterfaces" or "NetworkAdapters".
	Source string
	// Addrs are the addresses the BMC reports on it, when it reports any.
	Addrs []netip.Addr
}

// Inventory is what inspection found. Fields a protocol cannot report stay zero, and the
// booleans say so rather than leaving a caller to guess.
type Inventory struct {
	// UUID is the SMBIOS system UUID in canonical form. For IPMI it is the Get System GUID
	// bytes read in the SMBIOS byte order; UUIDRaw holds those bytes as received.
	UUID    hwid.UUID
	UUIDRaw hwid.UUID
	HasUUID bool

	Manufacturer string
	Model        string
	Serial       string

	// NICs are the host's Ethernet interfaces (physical only, one per MAC). NICsKnown is
	// false when the protocol cannot list them (IPMI): then NICs is empty, never invented.
	NICs      []NIC
	NICsKnown bool

	// HostAddrs are addresses the BMC reports for the host's interfaces.
	HostAddrs []netip.Addr
	// BMCAddrs and BMCMAC describe the BMC's own management interface.
	BMCAddrs []netip.Addr
	BMCMAC   hwid.MAC
}

// Inspector reads the machine's identity and interfaces.
type Inspector interface {
	Inspect(ctx context.Context) (Inventory, error)
}

// VirtualMediaController inserts and ejects a CD/DVD image by URL.
type VirtualMediaController interface {
	// InsertMedia attaches the image at url as the machine's virtual CD, ejecting whatever
	// another image was inserted. Inserting the image already inserted is a no-op.
	InsertMedia(ctx context.Context, url string) error
	// EjectMedia ejects the virtual CD. Ejecting an empty drive is a no-op.
	EjectMedia(ctx context.Context) error
}

// FirmwareUpdate asks the BMC to fetch and apply an image.
type FirmwareUpdate struct {
	// URL the BMC fetches the image from.
	URL string
	// Targets are the BMC's ids for the components to update; empty lets the BMC decide.
	Targets []string
	// Version is the version the image installs, if known. Where the BMC's task cannot say
	// how the update ended (it vanished, it still reads running, there was none), a driver
	// that can read the firmware inventory confirms the update by finding this version
	// there; without it such an outcome is ErrOutcomeUnknown.
	Version string
}

// FirmwareResult is how an update ended.
type FirmwareResult struct {
	// Task is the BMC's task id, when it ran the update as a task.
	Task string
	// State is the task's final state ("Completed", "Exception", ...); "Completed" when the
	// BMC answered synchronously.
	State string
	// Messages are what the BMC said about the task, in order.
	Messages []string
}

// FirmwareUpdater runs a firmware update from a URL and follows it to the end.
type FirmwareUpdater interface {
	UpdateFirmware(ctx context.Context, u FirmwareUpdate) (FirmwareResult, error)
}

// Disk is a storage device the BMC lists.
type Disk struct {
	Name          string
	Model         string
	Serial        string
	CapacityBytes int64
	// Controller is the BMC's id for the storage controller or subsystem.
	Controller string
	// Health as the BMC says it ("OK", "Warning", "Critical", or empty).
	Health string
}

// StorageLister lists the machine's disks.
type StorageLister interface {
	Storage(ctx context.Context) ([]Disk, error)
}

// CredentialRotator changes a BMC account's password.
type CredentialRotator interface {
	// RotatePassword sets a new password for the account named username. When it is the
	// driver's own account, the driver uses the new password from then on.
	RotatePassword(ctx context.Context, username, newPassword string) error
}

// OpEvent reports one finished driver operation to a host's hook (the drivers' OnOp
// config field), for metrics: count by Driver, Op and KindOf(Err); time by Duration.
type OpEvent struct {
	Driver   string
	Op       string
	Addr     string
	Duration time.Duration
	// Err is nil on success.
	Err error
}
