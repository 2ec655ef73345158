package bootevents

import (
	"encoding/json"
	"net/http"
	"path"

	"github.com/bettercompute/siteboot/hwid"
)

// Report is what [MachineHandler] answers: the machine's timeline (nil for a machine
// never seen) and its diagnosis.
type Report struct {
	Machine   *Machine  `json:"machine"`
	Diagnosis Diagnosis `json:"diagnosis"`
}

// MachineHandler answers GET .../MAC (the last element of the path) with the machine's
// [Report] as JSON: 200, or 404 with the diagnosis of a machine never seen; 400 for a
// malformed MAC, and 503 when t is nil (the host keeps no timeline). facts, when not nil,
// says what the host knows of the machine besides its timeline (its entry, the fence).
// It belongs on a listener only the site's operators reach: a timeline names machines,
// their addresses and their boot files.
func MachineHandler(t *Timeline, facts func(hwid.MAC) Facts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mac, err := hwid.ParseMAC(path.Base(r.URL.Path))
		if err != nil {
			http.Error(w, "malformed MAC", http.StatusBadRequest)
			return
		}
		if t == nil {
			http.Error(w, "the boot timeline is off", http.StatusServiceUnavailable)
			return
		}
		var f Facts
		if facts != nil {
			f = facts(mac)
		}
		m, ok := t.Machine(mac)
		rep := Report{Diagnosis: Explain(m, ok, f)}
		if ok {
			rep.Machine = &m
		}
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusNotFound)
		}
		json.NewEncoder(w).Encode(rep)
	})
}
