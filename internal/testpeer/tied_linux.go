package testpeer

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

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

// setDeathSignal sets the parent-death signal: SIGKILL.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// startTied starts cmd on the forking thread, with the parent-death signal set.
func startTied(cmd *exec.Cmd) error {
	setDeathSignal(cmd)
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
