package testpeer

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"go.uber.org/goleak"
)

// IgnoreForker is the goleak option a package's leak check needs when its tests start
// processes through testpeer: the forking goroutine lives as long as the test binary.
var IgnoreForker = goleak.IgnoreTopFunction("github.com/bettercompute/siteboot/internal/testpeer.forkLoop")

// Linux sends a child its parent-death signal (SysProcAttr.Pdeathsig) when the thread that
// forked it exits, not when the process does. Go ends an OS thread when a goroutine locked
// to it returns (Netns.Do's goroutines do), so a process started from such a goroutine would
// be killed at once, and one started from an ordinary goroutine depends on which thread the
// scheduler ran it on. Every process Start makes is therefore forked by one goroutine locked
// to its own thread for the life of the test binary: the signal then comes exactly when the
// binary dies, however it dies (a timeout's panic, SIGKILL, a crash).
var forker struct {
	once sync.Once
	reqs chan forkReq
}

type forkReq struct {
	cmd  *exec.Cmd
	errc chan error
}

// StartTied starts cmd so that it gets SIGKILL when the test binary dies: it sets the
// parent-death signal and forks from the thread that lives as long as the binary. Start
// uses it; call it directly for a command whose output the test reads itself (a build, say),
// then Wait as usual.
func StartTied(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return startTied(cmd)
}

// startTied starts cmd on the forking thread. cmd.SysProcAttr.Pdeathsig should be set.
func startTied(cmd *exec.Cmd) error {
	forker.once.Do(func() {
		forker.reqs = make(chan forkReq)
		go forkLoop(forker.reqs)
	})
	errc := make(chan error, 1)
	forker.reqs <- forkReq{cmd: cmd, errc: errc}
	return <-errc
}

// forkLoop starts the commands it is sent, locked to its thread and never unlocked: it never
// returns, so its thread lives as long as the process.
func forkLoop(reqs <-chan forkReq) {
	runtime.LockOSThread()
	for r := range reqs {
		r.errc <- r.cmd.Start()
	}
}
