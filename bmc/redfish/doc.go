// Package redfish is the bmc driver for DMTF Redfish, built on
// github.com/stmcginnis/gofish (v0.26, package schemas).
//
// # Wiring
//
//	reg.Register("redfish", redfish.Config{RootCAs: pool})
//	d, err := reg.Open(ctx, bmc.Target{Driver: "redfish", Address: "https://10.0.0.5",
//		Username: u, Password: p, CertSHA256: pin})
//	defer d.Close() // DELETE of the session: BMCs cap sessions (Lenovo XCC at 16)
//
// Dial logs in with a session (POST SessionService/Sessions) unless Config.BasicAuth, and
// binds the driver to the first ComputerSystem. A session the BMC expired is replaced once,
// transparently, on the 401 it causes. Close always logs out.
//
// # TLS
//
// Each Driver has its own http.Transport; nothing it sets reaches another client or the
// process-wide transport. Verification is on: against Config.RootCAs (or the system roots),
// or, when Target.CertSHA256 is set, against that pinned leaf certificate alone.
// Target.Insecure turns verification off for that target only.
//
// # Vendor behaviours handled
//
//   - BootSourceOverrideMode: sent (requested, or the system's current mode) because
//     Supermicro needs it; when a BMC rejects it (HPE iLO) the PATCH is sent again with
//     Target and Enabled only; when a BMC demands it and none was known, again with UEFI.
//   - BootSourceOverrideEnabled "Continuous" refused (Lenovo XCC), or absent from the
//     allowed values: ErrUnsupported, nothing changed.
//   - If-Match: PATCHes carry the resource's ETag; on 412 the ETag is fetched again and
//     the PATCH retried, then sent without If-Match. Actions answered 412 are retried
//     without If-Match (gofish does this).
//   - VirtualMedia without InsertMedia/EjectMedia actions: the resource is PATCHed.
//   - NIC MACs: from the system's EthernetInterfaces (physical only) and from the
//     chassis' NetworkAdapters/NetworkDeviceFunctions.
//   - No PowerCycle reset type: a cycle is ForceOff then On.
//   - Firmware update: SimpleUpdate's task monitor is polled to the end.
//
// Everything is tested against bmc/bmctest, which serves the DMTF public-rackmount1
// mockup and imitates each behaviour above.
package redfish
