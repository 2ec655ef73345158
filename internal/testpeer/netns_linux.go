package testpeer

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// namespaces: this system has network namespaces.
const namespaces = true

func (n *Netns) do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it leaves with this goroutine instead of going back
		// to the scheduler inside another namespace.
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+n.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("testpeer: open namespace %s: %w", n.name, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("testpeer: enter namespace %s: %w", n.name, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}
