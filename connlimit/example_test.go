package connlimit_test

import (
	"errors"
	"fmt"
	"net"
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
