package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/internal/simmachine"
)

// printer writes the lab's story; lines from concurrent machines never interleave.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	color bool
}

func newPrinter(f *os.File) *printer {
	fi, err := f.Stat()
	return &printer{w: f, color: err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("NO_COLOR") == ""}
}

func (p *printer) linef(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "  "+format+"\n", args...)
}

func (p *printer) section(title string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.color {
		title = "\x1b[1m" + title + "\x1b[0m"
	}
	fmt.Fprintf(p.w, "\n%s\n", title)
}

func mark(ok bool) string {
	if ok {
		return "ok  "
	}
	return "FAIL"
}

// machine prints one line per finished machine.
func (p *printer) machine(o *outcome) {
	switch {
	case o.err == nil:
		r := o.res
		p.linef("%s %s %s  booted via %s in %4.2fs (%s over TFTP, kernel+initrd from cache); joined, deploy image from cache",
			mark(true), o.name, o.mac, o.agent, r.Stages[simmachine.StageBoot].Seconds(), r.BootFile)
	case o.res != nil && len(o.res.Stages) == 0:
		p.linef("--   %s %s  no proxy DHCP answer: fell through to the next boot device (%v)", o.name, o.mac, o.err)
	default:
		p.linef("%s %s %s  %v", mark(false), o.name, o.mac, o.err)
	}
}

// summary prints the machines, per-stage timings and every check, and says whether all of it
// happened.
func (l *lab) summary(p *printer, outcomes []*outcome, checks []check, n, unknown int, took time.Duration) bool {
	booted := map[string]int{}
	var failed []*outcome
	for _, o := range outcomes {
		if o.mac == machineMAC(unknown) {
			continue
		}
		if o.err == nil {
			booted[o.agent]++
		} else {
			failed = append(failed, o)
		}
	}
	total := booted["agent-a"] + booted["agent-b"]
	p.linef("machines booted: %d of %d (agent-a %d, agent-b %d); failed: %d", total, n, booted["agent-a"], booted["agent-b"], len(failed))
	for _, o := range failed {
		p.linef("  %s %s: %v", o.name, o.mac, o.err)
	}
	// Each agent's own counters, as its status reports carry them.
	for _, a := range l.agents {
		c := a.a.Stats()
		p.linef("%s counted: %d proxy DHCP answers, %d TFTP transfers, %d scripts, %d assertions signed, %d cache answers, %d fenced script requests",
			a.name, c["proxydhcp_answered_67"]+c["proxydhcp_answered_4011"], c["tftp_completed"], c["boot_scripts"],
			c["assertions_issued"], c["cache_served"], c["boot_fenced"])
	}

	p.linef("")
	p.linef("%-8s %8s %8s %8s", "stage", "p50", "p99", "max")
	row := func(name string, d []time.Duration) {
		slices.Sort(d)
		p.linef("%-8s %7.0fms %7.0fms %7.0fms", name, ms(pct(d, 50)), ms(pct(d, 99)), ms(d[len(d)-1]))
	}
	var done []*outcome
	for _, o := range outcomes {
		if o.err == nil {
			done = append(done, o)
		}
	}
	if len(done) > 0 {
		for i, s := range simmachine.Stages {
			if s == simmachine.StageBoot {
				continue // the same instant as the kernel's end
			}
			var d []time.Duration
			for _, o := range done {
				prev := time.Duration(0)
				if i > 0 {
					prev = o.res.Stages[simmachine.Stages[i-1]]
				}
				d = append(d, o.res.Stages[s]-prev)
			}
			row(string(s), d)
		}
		var total []time.Duration
		for _, o := range done {
			total = append(total, o.res.Stages[simmachine.StageBoot])
		}
		row("total", total)
		p.linef("(each stage's own time; the machines that booted during the failover spent theirs in dhcp, waiting for agent-b)")
	}

	p.linef("")
	all := true
	for _, c := range checks {
		all = all && c.ok
		note := ""
		if !c.ok || strings.Contains(c.what, "took over") {
			note = " (" + c.note + ")"
		}
		p.linef("%s  %s%s", mark(c.ok), c.what, note)
	}
	ok := all && total == n && booted["agent-a"] > 0 && booted["agent-b"] > 0
	p.linef("")
	if ok {
		p.linef("All %d machines booted, the unknown one was listed and not answered, the lease failed over once, and every refusal held. (%.1fs)", n, took.Seconds())
	} else {
		p.linef("Something that should have happened did not: see FAIL above. (%.1fs)", took.Seconds())
	}
	return ok
}

func pct(d []time.Duration, p int) time.Duration {
	i := (len(d)*p + 99) / 100
	return d[max(0, min(len(d)-1, i-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
