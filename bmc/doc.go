// Package bmc defines how siteboot talks to baseboard management controllers: a small
// Driver interface, optional capability interfaces a driver implements when its protocol
// and the BMC allow (power, one-time boot device, inspection, virtual media, firmware
// update, storage listing, credential rotation), a Registry that opens a driver by name,
// typed errors that say what failed, and a Journal that keeps a retried operation from
// being sent twice.
//
// Drivers live in sub-packages: bmc/redfish (DMTF Redfish over gofish) and bmc/ipmi (IPMI
// 2.0 lanplus over go-ipmi). bmc/bmctest serves a fake Redfish BMC for tests.
//
// # Wiring
//
// The host builds a Registry once, registering each driver it supports under the name its
// inventory uses; there is no package-level registry:
//
//	reg := bmc.NewRegistry()
//	reg.Register("redfish", redfish.Config{RootCAs: pool})
//	reg.Register("ipmi", ipmi.Config{})
//	d, err := reg.Open(ctx, bmc.Target{Driver: "redfish", Address: "https://10.0.0.5", Username: u, Password: p})
//	if err != nil { ... }           // errors.Is(err, bmc.ErrUnsupportedDriver) for a name nobody registered
//	defer d.Close()                  // logs the session out; BMCs cap sessions
//	if pc, ok := d.(bmc.PowerController); ok { err = pc.SetPower(ctx, bmc.PowerCycle) }
//
// A capability a driver lacks is a failed type assertion; a capability the driver has but
// this BMC refuses or does not offer is an error matching ErrUnsupported.
//
// # Errors
//
// Every driver error is an *OpError whose Kind is one of ErrAuth, ErrUnreachable,
// ErrTimeout, ErrTLS, ErrRefused (the BMC answered and said no; Message holds what it
// said), ErrUnsupported, ErrUnsupportedDriver, ErrInvalid or ErrInProgress. Test with
// errors.Is; the underlying library error stays reachable with errors.As.
//
// # Repeated requests
//
// A control plane that lost the answer to "power cycle machine X" retries, and a BMC must
// not cycle the machine twice. Runner.Run takes an operation id: the first call with an id
// runs the operation and records its outcome in a Journal; a repeat within the window
// returns the recorded outcome without contacting the BMC (ErrInProgress while the first
// is still running). A failure that shows nothing happened (unreachable, wrong
// credentials, refused) is not replayed: the repeat runs again. MemoryJournal is the
// in-process default; a host that restarts between a request and its retry supplies a
// persistent Journal.
//
// # Security
//
// Credentials are never logged and never appear in errors. Drivers verify TLS by default;
// skipping verification is a per-target choice (Target.Insecure) that never changes any
// other client. What a BMC returns is parsed into typed values (hwid.MAC, hwid.UUID,
// netip.Addr); a value that does not parse is dropped, not passed on.
package bmc
