package connlimit_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/bettercompute/siteboot/connlimit"
)

// One source may hold one connection here; its second is closed at once, and counted.
func Example() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := connlimit.New(inner, connlimit.Limits{PerSource: 1, Total: 100})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept() // admits the first; refuses the second while the first is open
		if err == nil {
			held <- c
		}
		l.Accept() // returns when l is closed
	}()

	first, _ := net.Dial("tcp", l.Addr().String())
	defer first.Close()
	c := <-held
	defer c.Close()

	second, err := net.Dial("tcp", l.Addr().String())
	if err == nil {
		second.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = second.Read(make([]byte, 1))
		second.Close()
	}
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	fmt.Println("second connection closed:", err != nil && !timedOut)
	s := l.Stats()
	fmt.Printf("open %d, accepted %d, refused per source %d\n", s.Open, s.Accepted, s.RefusedPerSource)
	// Output:
	// second connection closed: true
	// open 1, accepted 1, refused per source 1
}

// A quarter of the total is kept for the sources the host is booting: here 4 of 4, so a
// source that is not preferred gets nothing, and the preferred one gets in.
func ExampleListener_SetPreferred() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := connlimit.New(inner, connlimit.Limits{PerSource: 4, Total: 4, Reserve: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	booting := netip.MustParseAddr("127.0.0.1")
	l.SetPreferred(connlimit.PreferFunc(func(a netip.Addr) bool { return a == booting }))
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			c.Write([]byte("ok"))
		}
	}()
	for _, src := range []string{"127.0.0.2", "127.0.0.1"} {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			fmt.Println(src, "refused")
			continue
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 2))
		c.Close()
		fmt.Println(src, map[bool]string{true: "admitted", false: "refused"}[err == nil])
	}
	s := l.Stats()
	fmt.Printf("accepted %d (preferred %d), refused for the reserve %d\n", s.Accepted, s.AcceptedPreferred, s.RefusedReserve)
	// Output:
	// 127.0.0.2 refused
	// 127.0.0.1 admitted
	// accepted 1 (preferred 1), refused for the reserve 1
}
