package testpeer

import (
	"os/exec"

	"go.uber.org/goleak"
)

// IgnoreForker is the goleak option a package's leak check needs when its tests start
// processes through testpeer: the forking goroutine lives as long as the test binary.
var IgnoreForker = goleak.IgnoreTopFunction("github.com/bettercompute/siteboot/internal/testpeer.forkLoop")

// StartTied starts cmd so that it gets SIGKILL when the test binary dies: on Linux it sets
// the parent-death signal and forks from the thread that lives as long as the binary (other
// systems have no parent-death signal, and StartTied is cmd.Start). Start uses it; call it
// directly for a command whose output the test reads itself (a build, say), then Wait as
// usual.
func StartTied(cmd *exec.Cmd) error {
	setDeathSignal(cmd)
	return startTied(cmd)
}
