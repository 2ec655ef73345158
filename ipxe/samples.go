package ipxe

import "github.com/bettercompute/siteboot/metric"

var famAnswers = metric.Family{Name: "boot_answers_total", Help: "Answers of the /boot/ handler, by kind.", Labels: []string{"answer"}}

// Samples lists the handler's answers under the names of package metric's convention:
// boot_answers_total{answer}, one answer per kind of script, file or refusal.
func (s Stats) Samples() []metric.Sample {
	out := make([]metric.Sample, 0, 18)
	for _, a := range []struct {
		answer string
		n      uint64
	}{
		{"chain", s.Chains}, {"script", s.Scripts}, {"sanboot", s.Sanboots}, {"local", s.LocalBoots}, {"file", s.Files},
		{"unknown", s.Unknown}, {"mismatch", s.Mismatched}, {"unbound", s.Unbound}, {"uuid-refused", s.UUIDRefused},
		{"ip-refused", s.IPRefused}, {"fenced", s.Fenced}, {"token-wait", s.TokenWaits}, {"sanboot-wait", s.SanbootWaits},
		{"bad-request", s.BadRequests}, {"headers-too-large", s.HeadersTooLarge}, {"method-refused", s.MethodsRefused},
		{"not-found", s.NotFound}, {"error", s.Errors},
	} {
		out = append(out, famAnswers.Sample(a.n, a.answer))
	}
	return out
}
