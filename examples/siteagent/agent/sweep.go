package agent

import (
	"path/filepath"

	"github.com/bettercompute/siteboot/internal/atomicfile"
)

// sweepTemps removes the temporary files that writes interrupted by a crash left beside the
// agent's own files (the boot entries and the node key:
// ".tmp-boot-entries.json-RANDOM"), on start, before anything writes them. The image cache sweeps its own directory, bootbind.Nonces.LoadFile the nonces' file. A failure
// to sweep is logged and serving goes on: the leftovers only take space.
func (a *Agent) sweepTemps() {
	for _, path := range []string{filepath.Join(a.cfg.DataDir, EntriesFileName), a.cfg.keyFile()} {
		swept, err := atomicfile.Sweep(path)
		if err != nil {
			a.log.Warn("cannot sweep temporary files of interrupted writes", "file", path, "err", err)
		}
		if len(swept) > 0 {
			a.log.Info("removed temporary files of interrupted writes", "file", path, "count", len(swept))
		}
	}
}
