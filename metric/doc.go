// Package metric describes a component's counters as named samples, so that a host exports
// every component's counters with one loop and no table of its own. It imports no
// metrics library: a host turns a [Sample] into a Prometheus series, an OpenTelemetry
// instrument or a log line as it likes.
//
// # The naming convention
//
// A component's Stats struct has
//
//	func (s Stats) Samples() []metric.Sample
//
// listing each of its counters (and gauges) as a sample of a family. A family's name is
// lower-case snake case, begins with the component's subject (proxydhcp_, tftp_, cache_,
// boot_ for the /boot/ handler and the binding of machines to their DHCP answer,
// secureboot_, http_connections_, bmc_, lease_, control_, assertions_), and ends in _total
// for a counter and not for a gauge ([Check]); a host exports it as it is after its own
// namespace (the reference agent's is "siteboot_"). A count by reason is one family
// labelled by the reason's name, the name the package's ReasonOf gives. A label only the
// host knows (which of its listeners) is added by the host with [With]. Every sample of a
// family is listed, zero or not, except in a family whose labels multiply (tftp's
// outcomes, bmc's operations by kind and status): there only the non-zero ones are.
//
// # Wiring
//
// A host gathers the samples of its components and hands each one to its exporter; for
// Prometheus, one const metric per sample:
//
//	for _, s := range samples {
//		d := prometheus.NewDesc("siteboot_"+s.Name, s.Help, s.LabelNames(), nil)
//		ch <- prometheus.MustNewConstMetric(d, valueType(s.Kind), float64(s.Value), s.LabelValues()...)
//	}
package metric
