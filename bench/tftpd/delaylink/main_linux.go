// Command delaylink joins two network namespaces with a pair of tap devices and forwards
// Ethernet frames between them in user space, holding the frames of one direction for a
// fixed delay. It stands in for `tc qdisc ... netem delay` on kernels built without netem.
//
//	delaylink -ns1 SERVERNS -if1 tapS -ns2 CLIENTNS -if2 tapC -delay12 1ms
//
// It prints "ready" once both taps exist (unconfigured: the caller adds addresses and sets
// them up) and runs until SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	ns1 := flag.String("ns1", "", "namespace of the first tap (a name under /var/run/netns)")
	if1 := flag.String("if1", "tap0", "first tap's name")
	ns2 := flag.String("ns2", "", "namespace of the second tap")
	if2 := flag.String("if2", "tap0", "second tap's name")
	d12 := flag.Duration("delay12", time.Millisecond, "delay of frames from the first tap to the second")
	d21 := flag.Duration("delay21", 0, "delay of frames from the second tap to the first")
	flag.Parse()

	a, err := openTap(*ns1, *if1)
	if err != nil {
		fail(err)
	}
	b, err := openTap(*ns2, *if2)
	if err != nil {
		fail(err)
	}
	go forward(a, b, *d12)
	go forward(b, a, *d21)
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "delaylink:", err)
	os.Exit(1)
}

// openTap creates tap device name inside namespace ns and returns its descriptor.
func openTap(ns, name string) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return -1, err
	}
	defer orig.Close()
	if ns != "" {
		f, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			return -1, err
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			return -1, fmt.Errorf("setns %s: %w", ns, err)
		}
		defer unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return -1, err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return -1, fmt.Errorf("TUNSETIFF %s: %w", name, err)
	}
	return fd, nil
}

type frame struct {
	due time.Time
	b   []byte
}

// forward copies frames from one tap to the other, each delay after it was read, in order.
func forward(from, to int, delay time.Duration) {
	q := make(chan frame, 8192)
	go func() {
		for f := range q {
			if d := time.Until(f.due); d > 0 {
				time.Sleep(d)
			}
			unix.Write(to, f.b)
		}
	}()
	buf := make([]byte, 65536)
	for {
		n, err := unix.Read(from, buf)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			fail(err)
		}
		q <- frame{due: time.Now().Add(delay), b: append([]byte(nil), buf[:n]...)}
	}
}
