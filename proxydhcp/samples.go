package proxydhcp

import "github.com/bettercompute/siteboot/metric"

var (
	famAnswered = metric.Family{Name: "proxydhcp_answered_total", Help: "Proxy DHCP replies sent.", Labels: []string{"port"}}
	famSilent   = metric.Family{Name: "proxydhcp_silent_total", Help: "Proxy DHCP requests not answered, by reason.", Labels: []string{"reason", "port"}}
	famNoUUID   = metric.Family{Name: "proxydhcp_answered_no_uuid_total", Help: "Proxy DHCP replies (of those sent) given without the machine's UUID checked: the firmware sent no option 97.", Labels: []string{"port"}}
	famResent   = metric.Family{Name: "proxydhcp_resent_total", Help: "Second copies of DHCPv6 boot-server replies (port 4011), sent because EDK2 may miss the first.", Labels: []string{"port"}}
)

// Samples lists the counters of ports, under the names of package metric's convention:
// proxydhcp_answered_total{port}, proxydhcp_answered_no_uuid_total{port} (the answers given
// without the UUID checked), proxydhcp_silent_total{reason,port} for every
// [Reasons], and, when ports include PortDHCPv6, proxydhcp_resent_total{port="4011"}. A
// host names the ports it serves; none means all three.
func (s Stats) Samples(ports ...Port) []metric.Sample {
	if len(ports) == 0 {
		ports = []Port{PortDHCP, PortBoot, PortDHCPv6}
	}
	var out []metric.Sample
	v6 := false
	for _, p := range ports {
		ps := s.Port(p)
		out = append(out, famAnswered.Sample(ps.Answered, p.String()), famNoUUID.Sample(ps.AnsweredNoUUID, p.String()))
		for _, r := range Reasons() {
			out = append(out, famSilent.Sample(ps.Silent.Of(r), r.String(), p.String()))
		}
		v6 = v6 || p == PortDHCPv6
	}
	if v6 {
		out = append(out, famResent.Sample(s.Resent, PortBoot.String()))
	}
	return out
}
