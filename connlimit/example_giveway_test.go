package connlimit_test

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/connlimit"
)

// A metrics listener: at most 4 connections per source are refused beyond, and of 16
// open in all the oldest gives way to a new one, so idle connections never keep a
// scraper out.
func ExampleNewGiveWay() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	capped, err := connlimit.New(ln, connlimit.Limits{PerSource: 4, Total: 64})
	if err != nil {
		fmt.Println(err)
		return
	}
	metrics, err := connlimit.NewGiveWay(capped, 16)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer metrics.Close()
	// go srv.Serve(metrics), and export metrics.Stats().GaveWay beside capped.Stats().
	fmt.Println("give-way cap:", metrics.Max(), "per source:", capped.Limits().PerSource)
	// Output: give-way cap: 16 per source: 4
}

// The boot HTTP listener keeps room for the addresses proxy DHCP answered within the
// last five minutes.
func ExampleRecent() {
	clk := clocktest.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	answered, err := connlimit.NewRecent(connlimit.RecentConfig{Window: 5 * time.Minute, Clock: clk})
	if err != nil {
		fmt.Println(err)
		return
	}
	// limited.SetPreferred(answered), then on each answer to a machine:
	machine := netip.MustParseAddr("192.0.2.10")
	answered.Add(machine)
	fmt.Println("after the answer:", answered.Preferred(machine))
	clk.Advance(5 * time.Minute)
	fmt.Println("a window later:", answered.Preferred(machine))
	// Output:
	// after the answer: true
	// a window later: false
}
