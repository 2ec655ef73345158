// Package agent is the reference site agent: it wires siteboot's library packages into one
// daemon, and is what examples/siteagent runs and examples/bootlab starts twice. It is also
// a composition a Go host can reuse: a typed [Config] ([DefaultConfig], [Config.Validate]),
// its own [Link] to its control plane, its own [Clock], sockets it bound itself ([Options]).
//
// The agent holds composition only: configuration, metrics, the link, and the wiring of the
// packages that decide (proxydhcp, tftpd, ipxe, secureboot, bootbind, imagecache,
// discovery, assertion, lease, bmc, sitelink); proxy DHCP, TFTP and the boot HTTP server
// are one bootserver.Server, served on the sockets the agent bound. Each rule it enforces
// is the rule of one of those packages and is documented there;
// examples/siteagent/README.md describes what the agent does as a whole, for an operator:
// the walk of one MAC from its DHCP request to the assertion, the boot secrets, HTTPS
// boot, Secure Boot, start-up and -check, the control plane and the link's security, BMC access, IPv6,
// and the metrics.
//
// [New] binds the sockets its Config names (or takes those in Options) and builds the
// parts; [Agent.Run] serves them in one errgroup until its context ends, then drains them.
// Every rule that depends on time reads the one [Clock] in Options.
package agent
