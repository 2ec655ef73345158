package bmc

import "context"

// SecureBootState is a system's UEFI Secure Boot setting as its BMC reports it.
type SecureBootState struct {
	// Enabled is the setting (Redfish SecureBootEnable): whether the firmware enforces
	// Secure Boot from the next boot on.
	Enabled bool
	// CurrentBoot says whether the boot in progress was verified ("Enabled",
	// "Disabled", or "" when the BMC does not say).
	CurrentBoot string
	// Mode is the firmware's Secure Boot mode ("UserMode", "SetupMode", "AuditMode",
	// "DeployedMode", or "").
	Mode string
}

// SecureBootController reads and sets a system's Secure Boot enable, so that a site can
// turn it on before booting a signed chain.
type SecureBootController interface {
	SecureBoot(ctx context.Context) (SecureBootState, error)
	// SetSecureBoot sets the enable and reads it back: a BMC that answered success but
	// kept the other value is ErrDiffers. A system without the setting is
	// ErrUnsupported. It applies at the next boot.
	SetSecureBoot(ctx context.Context, enable bool) error
}
