package simmachine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// interp runs iPXE scripts the way iPXE does: settings expanded, the line split on white
// space, commands joined by || and &&, labels and goto. An HTTP answer other than 200 makes
// the fetching command fail, as in iPXE (the body of a 404 or 503 is never run).
type interp struct {
	m     *Machine
	res   *Result
	start time.Time
}

const maxChainDepth = 8

var errBooted = errors.New("booted")

// chain fetches the script at u and runs it in place of the current one.
func (in *interp) chain(ctx context.Context, u string, depth int) error {
	if depth >= maxChainDepth {
		return fmt.Errorf("simmachine: chain deeper than %d", maxChainDepth)
	}
	status, body, retryAfter, err := in.fetchScript(ctx, u)
	for tries := 0; err == nil && status == http.StatusServiceUnavailable && retryAfter > 0 && tries < maxRetryAfter; tries++ {
		// iPXE honours Retry-After on its own before the fetch counts as failed.
		in.m.event("%s answered 503, retrying after %v", u, retryAfter)
		if err := in.sleep(ctx, retryAfter); err != nil {
			return err
		}
		status, body, retryAfter, err = in.fetchScript(ctx, u)
	}
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return &statusError{URL: u, Status: status}
	}
	switch {
	case strings.Contains(u, "/boot/chain.ipxe"):
		in.m.done(in.res, in.start, StageChain, hostOf(u))
	case strings.Contains(u, "/boot/ipxe"):
		in.m.done(in.res, in.start, StageScript, hostOf(u))
	}
	err = in.run(ctx, u, string(body), depth)
	if errors.Is(err, errBooted) {
		return nil
	}
	return err
}

// maxRetryAfter bounds the Retry-After rounds of one fetch.
const maxRetryAfter = 10

func (in *interp) fetchScript(ctx context.Context, u string) (int, []byte, time.Duration, error) {
	status, body, hdr, err := in.m.fetchWithHeader(ctx, u)
	var after time.Duration
	if n, err := strconv.Atoi(hdr.Get("Retry-After")); err == nil && n > 0 {
		after = time.Duration(n) * time.Second
	}
	return status, body, after, err
}

// statusError is a fetch answered with another status than 200.
type statusError struct {
	URL    string
	Status int
}

func (e *statusError) Error() string { return fmt.Sprintf("%s: HTTP %d", e.URL, e.Status) }

func hostOf(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Hostname()
	}
	return ""
}

// run executes one script. It returns errBooted, errReboot, ErrExit, or an error when the
// script ended without booting.
func (in *interp) run(ctx context.Context, base, script string, depth int) error {
	lines := strings.Split(script, "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "#!ipxe" {
		return fmt.Errorf("simmachine: %s is not an iPXE script", base)
	}
	labels := map[string]int{}
	for i, l := range lines {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, ":") {
			labels[t[1:]] = i
		}
	}
	const maxSteps = 10000
	for pc, steps := 0, 0; pc < len(lines); pc++ {
		if steps++; steps > maxSteps {
			return errors.New("simmachine: script does not end")
		}
		words := strings.Fields(in.expand(lines[pc]))
		if len(words) == 0 || strings.HasPrefix(words[0], "#") || strings.HasPrefix(words[0], ":") {
			continue
		}
		// Split into commands and the operators between them.
		var cmds [][]string
		var ops []string
		cur := []string{}
		for _, w := range words {
			if w == "||" || w == "&&" {
				cmds, ops, cur = append(cmds, cur), append(ops, w), []string{}
				continue
			}
			cur = append(cur, w)
		}
		cmds = append(cmds, cur)
		var rc error
		for i, c := range cmds {
			if i > 0 && ((ops[i-1] == "||") == (rc == nil)) {
				continue
			}
			rc = in.exec(ctx, base, c, depth)
			var g gotoLabel
			if errors.As(rc, &g) {
				target, ok := labels[string(g)]
				if !ok {
					return fmt.Errorf("simmachine: goto %s: no such label", g)
				}
				pc = target
				rc = nil
				break
			}
			if errors.Is(rc, errBooted) || errors.Is(rc, errReboot) || errors.Is(rc, ErrExit) || ctx.Err() != nil {
				return rc
			}
		}
	}
	return errors.New("simmachine: script ended without booting")
}

type gotoLabel string

func (g gotoLabel) Error() string { return "goto " + string(g) }

// exec runs one command; nil is success.
func (in *interp) exec(ctx context.Context, base string, c []string, depth int) error {
	if len(c) == 0 {
		return errors.New("empty command")
	}
	args := c[1:]
	// Drop --options; --name takes a value.
	var plain []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--name" || args[i] == "-n":
			i++
		case strings.HasPrefix(args[i], "--"):
		default:
			plain = append(plain, args[i])
		}
	}
	switch c[0] {
	case "echo":
		in.m.event("script: %s", strings.Join(args, " "))
		return nil
	case "imgfree", "dhcp", "vcreate":
		if c[0] == "imgfree" {
			in.res.Kernel, in.res.Initrds, in.res.Cmdline = Fetched{}, nil, nil
		}
		return nil
	case "isset":
		if len(args) == 0 {
			return errors.New("not set")
		}
		return nil
	case "goto":
		if len(args) != 1 {
			return errors.New("goto: one label")
		}
		return gotoLabel(args[0])
	case "sleep":
		if len(args) != 1 {
			return errors.New("sleep: one argument")
		}
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		return in.sleep(ctx, time.Duration(n)*time.Second)
	case "reboot":
		return errReboot
	case "exit":
		return ErrExit
	case "kernel", "initrd", "sanboot":
		if len(plain) == 0 {
			return fmt.Errorf("%s: no URL", c[0])
		}
		u, err := resolve(base, plain[0])
		if err != nil {
			return err
		}
		status, f, err := in.m.fetch(ctx, u)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return &statusError{URL: u, Status: status}
		}
		switch c[0] {
		case "kernel":
			in.res.Kernel, in.res.Cmdline = f, plain[1:]
		case "initrd":
			in.res.Initrds = append(in.res.Initrds, f)
		case "sanboot":
			in.res.Kernel = f
			in.m.done(in.res, in.start, StageKernel, hostOf(u))
			in.m.done(in.res, in.start, StageBoot, hostOf(u))
			return errBooted
		}
		return nil
	case "boot":
		if in.res.Kernel.URL == "" {
			return errors.New("boot: no kernel")
		}
		in.m.done(in.res, in.start, StageKernel, hostOf(in.res.Kernel.URL))
		in.m.done(in.res, in.start, StageBoot, hostOf(in.res.Kernel.URL))
		return errBooted
	case "chain":
		if len(plain) == 0 {
			return errors.New("chain: no URL")
		}
		u, err := resolve(base, plain[0])
		if err != nil {
			return err
		}
		if err := in.chain(ctx, u, depth+1); err != nil {
			var se *statusError
			if errors.As(err, &se) {
				in.m.event("chain %s answered %d", se.URL, se.Status)
			}
			return err // a failed fetch fails the command: the script's || takes over
		}
		return errBooted
	}
	return fmt.Errorf("simmachine: unknown command %q", c[0])
}

func (in *interp) sleep(ctx context.Context, d time.Duration) error {
	scale := in.m.SleepScale
	if scale == 0 {
		scale = 1
	}
	t := time.NewTimer(time.Duration(float64(d) * scale))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func resolve(base, ref string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	return b.ResolveReference(r).String(), nil
}

// expand replaces ${setting[:type]} with the machine's values, as iPXE does before it
// splits the line.
func (in *interp) expand(line string) string {
	var b strings.Builder
	for {
		i := strings.Index(line, "${")
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		j := strings.IndexByte(line[i:], '}')
		if j < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		b.WriteString(in.setting(line[i+2 : i+j]))
		line = line[i+j+1:]
	}
}

func (in *interp) setting(name string) string {
	name, typ, _ := strings.Cut(name, ":")
	if k := strings.IndexByte(name, '/'); k >= 0 {
		name = name[k+1:] // net0/mac, net0-100/ip: one interface here
	}
	var v string
	switch name {
	case "mac":
		v = in.m.MAC.String()
	case "ip":
		v = in.m.IP.String()
	case "uuid":
		v = in.m.UUID.String()
	}
	switch typ {
	case "uristring":
		return uriString(v)
	case "hexhyp":
		return strings.ReplaceAll(v, ":", "-")
	}
	return v
}

// uriString encodes like iPXE's uristring setting type: everything but unreserved
// characters is percent-encoded.
func uriString(s string) string {
	const hexdigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&15])
	}
	return b.String()
}
