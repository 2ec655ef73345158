// Command serve runs a tftpd.Server over a directory, for the side-by-side benchmark in
// bench/tftpd/run.sh.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
)

func main() {
	dir := flag.String("dir", "", "directory to serve")
	addr := flag.String("addr", "127.0.0.1:6969", "UDP address to listen on")
	maxT := flag.Int("max", 0, "MaxTransfers (0: default)")
	perSource := flag.Int("per-source", 0, "MaxPerSource (0: default)")
	flag.Parse()

	srv := &tftpd.Server{
		Dir:          *dir,
		MaxTransfers: *maxT,
		MaxPerSource: *perSource,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if err := srv.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	fmt.Fprintln(os.Stderr, "serving", *dir, "on", *addr)
	srv.Addr = *addr
	if err := srv.ListenAndServe(); !errors.Is(err, tftpd.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c := srv.Stats()
	fmt.Fprintf(os.Stderr, "stats: %+v\n", c)
}
