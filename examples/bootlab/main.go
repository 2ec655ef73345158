// Command bootlab shows siteboot working end to end in one command, on loopback, without
// root: a control plane, two site agents (agent-a holds the site's boot lease, agent-b
// stands by) and simulated machines that boot through them with real protocol clients:
// proxy DHCP, TFTP of the iPXE build, the iPXE chain and script over HTTP, the kernel and
// initrd from the image cache under the grant in the script, and the signed assertion on the
// kernel command line checked by the control plane's verifier. Midway, agent-a is stopped;
// agent-b takes over once the lease expires and boots the rest.
//
//	go run ./examples/bootlab [-machines 20] [-v]
//
// It exits 0 only if everything that should happen happened.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"
)

func main() {
	machines := flag.Int("machines", 20, "how many known machines boot (half before the failover, half after)")
	verbose := flag.Bool("v", false, "also print the agents' and control plane's logs")
	flag.Parse()
	if *machines < 2 || *machines > 200 {
		fmt.Fprintln(os.Stderr, "bootlab: -machines must be 2 to 200")
		os.Exit(2)
	}
	level := slog.LevelWarn + 4 // quiet: the lab prints its own story
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	out := newPrinter(os.Stdout)
	ok, err := run(ctx, log, out, *machines)
	if err != nil {
		out.linef("bootlab: %v", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}
