package sitelink

import "github.com/bettercompute/siteboot/metric"

var (
	famSyncErrors = metric.Family{Name: "control_sync_errors_total", Help: "Heartbeats the control plane did not answer."}
	famEntries    = metric.Family{Name: "boot_entries", Help: "Live boot entries.", Kind: metric.Gauge}
	famDamaged    = metric.Family{Name: "boot_entries_damaged", Help: "1 when the boot entries file was damaged at start: set aside, the valid entries served.", Kind: metric.Gauge}
)

// Samples lists the heartbeat's failures under the names of package metric's convention:
// control_sync_errors_total.
func (s HeartbeatStats) Samples() []metric.Sample {
	return []metric.Sample{famSyncErrors.Sample(s.Errors)}
}

// Samples lists the store under the names of package metric's convention: the gauges
// boot_entries (live entries) and boot_entries_damaged (1 when the file was damaged at
// open).
func (s *EntryStore) Samples() []metric.Sample {
	damaged := uint64(0)
	if _, ok := s.Damage(); ok {
		damaged = 1
	}
	return []metric.Sample{famEntries.Sample(s.live()), famDamaged.Sample(damaged)}
}

// live counts the live entries, copying none (a status report lists samples every
// heartbeat).
func (s *EntryStore) live() uint64 {
	now := s.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := uint64(0)
	for _, p := range s.m {
		if now.Before(p.NotAfter) {
			n++
		}
	}
	return n
}
