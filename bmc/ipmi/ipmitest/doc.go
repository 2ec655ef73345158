// Package ipmitest starts real IPMI 2.0 BMCs on loopback for tests, the way
// net/http/httptest starts web servers:
//
//   - StartSim: OpenIPMI's ipmi_sim (Debian openipmi) with a chassis-control script that
//     keeps power and boot state in files and logs every call, and a LAN-config script
//     whose parameters a test can make fail (Sim.FailLAN); in a network namespace on a
//     segment's address (SimOptions.Netns, Addr) when the BMC must be reached from there;
//     and with a Chassis, in front of a machine the test runs itself (a QEMU machine): the
//     chassis script logs every call and hands power on and off to the test, and "get
//     power" answers from whether the test's machine process lives;
//   - StartPyghmi: pyghmi's FakeBmc (Debian python3-pyghmi, the IPMI stack virtualbmc is
//     built on), which answers Chassis Control power cycle with 0xcc and Get System GUID
//     with 0xc1, as virtualbmc and some real BMCs do;
//   - StartVirtualBMC: OpenStack's virtualbmc (kept in testdata) in front of a real QEMU
//     domain of a private, unprivileged libvirtd; it needs root.
//
// A test that starts one skips naming the Debian package to install when something is
// missing, and fails instead under SITEBOOT_REQUIRE_PEERS=1 (internal/testpeer). Every
// process is stopped by its PID at the test's cleanup and dies with the test binary.
package ipmitest
