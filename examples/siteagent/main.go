// Command siteagent is a reference site agent built from siteboot's packages: it answers PXE
// and UEFI HTTP boot through proxy DHCP beside the site's own DHCP server, serves the iPXE
// builds over TFTP, hands each known machine its iPXE script with a signed discovery
// assertion (or, to a machine that boots with UEFI Secure Boot, shim, Debian's signed GRUB
// and its GRUB configuration), serves images from a verified cache under grants, and does
// all of it only while it holds the site's boot lease.
//
// Usage:
//
//	siteagent -config /etc/siteagent/config.toml
//	siteagent -check /etc/siteagent/config.toml   # validate and exit
//	siteagent explain [-metrics 127.0.0.1:9464 | -config FILE] MAC   # why didn't it boot?
//
// The file is TOML (see package configfile for its keys, agent.Config for what they mean);
// testdata/example.toml is a complete example. The link to the control plane is mutual TLS
// with the site certificate named in [control]; a plain http:// control URL is refused
// unless control.insecure = true.
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

	"github.com/bettercompute/siteboot/connlimit"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/configfile"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "explain" {
		os.Exit(explain(os.Args[2:], os.Stdout, os.Stderr))
	}
	configPath := flag.String("config", "", "the agent's TOML config file")
	check := flag.String("check", "", "validate this config file and exit")
	flag.Parse()

	if *check != "" {
		if _, err := configfile.Load(*check); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("config ok")
		return
	}
	if *configPath == "" {
		fmt.Fprintln(os.Stderr, "usage: siteagent -config FILE | -check FILE")
		os.Exit(2)
	}
	f, err := configfile.Load(*configPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg := &f.Agent
	log := newLogger(f.Log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		log.Error("data dir", "err", err)
		os.Exit(1)
	}
	// The descriptor budget the HTTP connection caps are derived from: the soft limit raised
	// to the hard one (DESIGN.md S4).
	if nofile, err := connlimit.RaiseNOFILE(); err != nil {
		log.Warn("raise RLIMIT_NOFILE", "err", err)
	} else {
		log.Debug("descriptor limit", "nofile", nofile)
	}
	// A nil Link: the agent's own, over mutual TLS with the site certificate in [control]
	// (or plain http with control.insecure = true).
	a, err := agent.New(ctx, cfg, nil, agent.Options{Logger: log})
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("stopped", "err", err)
		os.Exit(1)
	}
}

func newLogger(c configfile.Log) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
