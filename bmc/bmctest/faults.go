package bmctest

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Faults make the fake behave like one BMC among a site's many: slow, now and then busy,
// and now and then one that takes a power change and quietly undoes it. The zero value
// adds nothing.
type Faults struct {
	// MinLatency and MaxLatency bound a delay added before each request is handled,
	// drawn uniformly between them (outside the fake's lock, so concurrent requests
	// overlap). Zero adds none.
	MinLatency, MaxLatency time.Duration
	// TransientRate is the share of requests, logouts aside, answered 503 with the Base
	// registry's ServiceTemporarilyUnavailable and not acted on (0 to 1).
	TransientRate float64
	// RevertPowerAfterReads makes the system undo every accepted power change after this
	// many reads of the system that follow it have shown the change: a machine asked on
	// (or cycled) reads Off from the next read on, one asked off reads On. Zero never
	// reverts.
	RevertPowerAfterReads int
	// Seed seeds the fake's random draws (latency, transient answers).
	Seed uint64
}

// faultState is what Faults keep between requests.
type faultState struct {
	mu  sync.Mutex // guards rng (drawn outside the Server's lock)
	rng *rand.Rand

	// Under the Server's lock:
	revertReads  int    // reads of the system left before the revert; 0: none pending
	revertTo     string // the PowerState the revert restores
	peakSessions int
	transients   int
	powerOns     []time.Time
	powerOnsSent []time.Time
	arrived      time.Time // when the request being served arrived, before its latency
}

func (f *faultState) init(o Faults) {
	f.rng = rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
}

func (s *Server) draw() float64 {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.rng.Float64()
}

// delay waits the request's latency (Faults.MinLatency to MaxLatency).
func (s *Server) delay(r *http.Request) {
	f := s.opts.Faults
	if f.MaxLatency <= 0 {
		return
	}
	d := f.MinLatency
	if f.MaxLatency > f.MinLatency {
		d += time.Duration(s.draw() * float64(f.MaxLatency-f.MinLatency))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// transient reports whether this request is answered busy (Faults.TransientRate); it
// answers it. Called under s.mu.
func (s *Server) transient(w http.ResponseWriter, r *http.Request) bool {
	rate := s.opts.Faults.TransientRate
	if rate <= 0 || r.Method == http.MethodDelete || s.draw() >= rate {
		return false
	}
	s.faults.transients++
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "Base.1.8.ServiceTemporarilyUnavailable",
		"The service is temporarily unavailable. Retry in 1 seconds.", "1")
	return true
}

// armRevert notes an accepted power change of sys (the time of a power-on, and
// Faults.RevertPowerAfterReads). Called under s.mu.
func (s *Server) armRevert(sys map[string]any) {
	if sys["PowerState"] == "On" {
		s.faults.powerOns = append(s.faults.powerOns, time.Now())
		s.faults.powerOnsSent = append(s.faults.powerOnsSent, s.faults.arrived)
	}
	n := s.opts.Faults.RevertPowerAfterReads
	if n <= 0 {
		return
	}
	s.faults.revertReads, s.faults.revertTo = n+1, "On"
	if sys["PowerState"] == "On" {
		s.faults.revertTo = "Off"
	}
}

// countRevert counts a read of the system and reverts when due. Called under s.mu before
// the system is served.
func (s *Server) countRevert(p string) {
	if p != s.sysPath || s.faults.revertReads <= 0 {
		return
	}
	if s.faults.revertReads--; s.faults.revertReads == 0 {
		s.res[s.sysPath]["PowerState"] = s.faults.revertTo
	}
}

// notePeak records the number of open sessions after a login. Called under s.mu.
func (s *Server) notePeak() {
	s.faults.peakSessions = max(s.faults.peakSessions, len(s.sessions))
}

// PeakSessions returns the most sessions that were open at once.
func (s *Server) PeakSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.peakSessions
}

// Transients returns how many requests Faults.TransientRate answered busy.
func (s *Server) Transients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.transients
}

// PowerState returns the system's PowerState as the fake holds it now (no read counted).
func (s *Server) PowerState() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, _ := s.res[s.sysPath]["PowerState"].(string)
	return st
}

// PowerOns returns when each accepted ComputerSystem.Reset that left the system on (a
// power-on, a cycle, a restart) was carried out, in order.
func (s *Server) PowerOns() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.faults.powerOns...)
}

// PowerOnsSent returns, for each of PowerOns, when its request arrived, before the
// latency Faults add: on loopback, when it was sent. A site's power-on ramp bounds these;
// PowerOns are later by each request's latency, which differs from one to the next.
func (s *Server) PowerOnsSent() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.faults.powerOnsSent...)
}
