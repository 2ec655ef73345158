package bmc

import "github.com/bettercompute/siteboot/metric"

var (
	famOps      = metric.Family{Name: "bmc_operations_total", Help: "bmc.* commands run to an end, by kind and outcome (ok, failed, unknown, not-sent).", Labels: []string{"kind", "outcome"}}
	famReplayed = metric.Family{Name: "bmc_replayed_total", Help: "bmc.* commands answered from the agent's journal or the control plane's claim record, nothing sent, by kind.", Labels: []string{"kind"}}
	famClaims   = metric.Family{Name: "bmc_claims_total", Help: "Claims of destructive BMC operations asked through the link, by answer (granted, refused, reused, unanswered).", Labels: []string{"answer"}}
	famInFlight = metric.Family{Name: "bmc_operations_in_flight", Help: "bmc.* commands being run: waiting for their BMC or a slot, claiming, or sent.", Kind: metric.Gauge}
	famDeferred = metric.Family{Name: "bmc_deferred_total", Help: "bmc.* commands not started because the agent held as many commands, running or unreported, as it may (bmc.DefaultMaxHeld); the control plane sends them again.", Kind: metric.Counter}
	famDamaged  = metric.Family{Name: "bmc_journal_damaged", Help: "1 while the BMC journal is damaged (set aside): destructive bmc.* commands are refused until an operator clears it.", Kind: metric.Gauge}
)

// Samples lists the dispatcher's counters under the names of package metric's
// convention: bmc_operations_total{kind,outcome} and bmc_replayed_total{kind} (only the
// non-zero ones, of Kinds and Statuses), bmc_claims_total{answer} (every ClaimAnswer), the
// gauge bmc_operations_in_flight, and bmc_deferred_total.
func (s DispatchStats) Samples() []metric.Sample {
	var out []metric.Sample
	for _, k := range Kinds {
		ks := s.ForKind(k)
		for _, st := range Statuses {
			if n := ks.Status(st); n > 0 {
				out = append(out, famOps.Sample(n, string(k), string(st)))
			}
		}
		if ks.Replayed > 0 {
			out = append(out, famReplayed.Sample(ks.Replayed, string(k)))
		}
	}
	for _, a := range []ClaimAnswer{ClaimAnswerGranted, ClaimAnswerRefused, ClaimAnswerReused, ClaimAnswerUnanswered} {
		out = append(out, famClaims.Sample(s.Claims(a), string(a)))
	}
	return append(out, famInFlight.Sample(s.Running), famDeferred.Sample(s.Deferred))
}

// Samples lists the gauge bmc_journal_damaged: 1 while the journal is damaged
// ([FileJournal.Damage]).
func (j *FileJournal) Samples() []metric.Sample {
	_, damaged := j.Damage()
	return []metric.Sample{famDamaged.Sample(b2u(damaged))}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
