package secureboot

import (
	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/metric"
)

var (
	famAnswers = metric.Family{Name: "secureboot_answers_total",
		Help: "Proxy DHCP answers naming the signed chain (shim over TFTP, or the RAM disk of UEFI HTTP boot), by kind.", Labels: []string{"kind"}}
	famRefused = metric.Family{Name: "secureboot_refused_total",
		Help: "Secure Boot machines proxy DHCP stayed silent to, by reason.", Labels: []string{"reason"}}
	famUnbound = metric.Family{Name: "secureboot_unbound_total",
		Help: "GRUB configuration requests refused any secret for not presenting the machine's boot key, by reason.", Labels: []string{"reason"}}
	famKeys = metric.Family{Name: "secureboot_keys_total",
		Help: "Boot keys of the signed chain, by event.", Labels: []string{"event"}}
	famBadQuery = metric.Family{Name: "secureboot_bad_queries_total",
		Help: "GRUB configuration requests whose query did not parse, answered with the give-up configuration."}
	famOther = metric.Family{Name: "secureboot_fetch_other_address_total",
		Help: "Fetches under a machine's nonce from an address other than the first one."}
)

// RefusedUnavailable names the silence of a host that has no Chain to answer a Secure
// Boot machine with (its files missing): the host counts it, in Stats.Unavailable.
const RefusedUnavailable = "unavailable"

// Samples lists the chain's counters under the names of package metric's convention:
// secureboot_answers_total{kind} (pxe, http), secureboot_refused_total{reason}
// (unavailable, arch, ipv6, error), secureboot_unbound_total{reason} for every
// bootbind.Refusals, secureboot_keys_total{event} (issued, activated, dropped, busy) and
// secureboot_fetch_other_address_total and secureboot_bad_queries_total. The zero Stats lists them too: a host without a
// chain exports zeros and its own Unavailable count.
func (s Stats) Samples() []metric.Sample {
	out := []metric.Sample{
		famAnswers.Sample(s.AnswersPXE, "pxe"), famAnswers.Sample(s.AnswersHTTP, "http"),
		famRefused.Sample(s.Unavailable, RefusedUnavailable), famRefused.Sample(s.RefusedArch, RefusedArch),
		famRefused.Sample(s.RefusedIPv6, RefusedIPv6), famRefused.Sample(s.RefusedError, RefusedError),
	}
	for _, r := range bootbind.Refusals() {
		out = append(out, famUnbound.Sample(s.Unbound.Of(r), r.String()))
	}
	k := s.Keys
	return append(out, famKeys.Sample(k.Issued, "issued"), famKeys.Sample(k.Activated, "activated"),
		famKeys.Sample(k.Dropped, "dropped"), famKeys.Sample(k.Busy, "busy"), famOther.Sample(s.OtherAddress), famBadQuery.Sample(s.BadQueries))
}
