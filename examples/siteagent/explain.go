package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/examples/siteagent/configfile"
	"github.com/bettercompute/siteboot/hwid"
)

// explain is "siteagent explain [-metrics ADDR | -config FILE] MAC": it asks the running
// agent's /debug/machines/MAC and prints the one-line diagnosis, then the path of the
// machine's last boot with timings. It returns the exit status: 0 when the agent has seen
// the machine, 1 when not (or the agent could not be asked), 2 for bad usage.
func explain(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("explain", flag.ContinueOnError)
	fl.SetOutput(stderr)
	addr := fl.String("metrics", "", "the agent's metrics address (default: the config's metrics.listen, or 127.0.0.1:9464)")
	configPath := fl.String("config", "", "the agent's TOML config file, for its metrics address")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: siteagent explain [-metrics ADDR | -config FILE] MAC")
		return 2
	}
	mac, err := hwid.ParseMAC(fl.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *addr == "" {
		*addr = "127.0.0.1:9464"
		if *configPath != "" {
			f, err := configfile.Load(*configPath)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			if !f.Agent.Metrics.Listen.IsValid() {
				fmt.Fprintln(stderr, "explain: the config turns the metrics listener off")
				return 1
			}
			*addr = f.Agent.Metrics.Listen.String()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+*addr+"/debug/machines/"+mac.String(), nil)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "explain:", err)
		return 1
	}
	defer resp.Body.Close()
	var rep bootevents.Report
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		fmt.Fprintf(stderr, "explain: %s: %s\n", resp.Status, bootevents.Printable(string(b), 512))
		return 1
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&rep); err != nil {
		fmt.Fprintln(stderr, "explain: the agent's answer:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s\n", mac, rep.Diagnosis.Line)
	for _, s := range rep.Diagnosis.Path {
		line := fmt.Sprintf("  +%-10s %-9s %-8s %s", s.At.Round(time.Millisecond), s.Stage, s.Outcome, s.Reason)
		if s.Duration > 0 {
			line += fmt.Sprintf(" in %s", s.Duration.Round(time.Millisecond))
		}
		if s.Bytes > 0 {
			line += fmt.Sprintf(" %d bytes", s.Bytes)
		}
		if s.Detail != "" {
			line += " " + s.Detail
		}
		fmt.Fprintln(stdout, strings.TrimRight(line, " "))
	}
	if rep.Machine != nil {
		if b, ok := rep.Machine.Last(); ok {
			for _, l := range b.Console {
				fmt.Fprintf(stdout, "  console: %s\n", bootevents.Printable(l.Text, 512))
			}
		}
	}
	if resp.StatusCode == http.StatusNotFound {
		return 1
	}
	return 0
}
