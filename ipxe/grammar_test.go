package ipxe_test

import (
	"bytes"
	"fmt"
	"strings"
)

// This file reads scripts the way iPXE does (src/image/script.c process_script,
// src/core/exec.c split_command and command_terminator, src/core/settings.c
// expand_settings) and kernel command lines the way Linux does (lib/cmdline.c next_arg), but
// strictly: anything the renderer should never produce (a continuation, a CR, a control
// byte) is an error rather than something to interpret.

// ipxeCmd is one command of a line: its tokens, and the terminator that follows it ("||",
// "&&", ";" or "" at the end of the line).
type ipxeCmd struct {
	Argv []string
	Sep  string
}

// ipxeLine is one script line: an optional label and the commands on it. Comment holds
// whatever followed a '#' token.
type ipxeLine struct {
	Label   string
	Cmds    []ipxeCmd
	Comment string
}

func isIPXESpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\v' || b == '\f' || b == '\r'
}

// parseIPXE parses a script. The first line must be the #!ipxe magic.
func parseIPXE(script []byte) ([]ipxeLine, error) {
	if !bytes.HasPrefix(script, []byte("#!ipxe\n")) {
		return nil, fmt.Errorf("no #!ipxe magic")
	}
	if !bytes.HasSuffix(script, []byte("\n")) {
		return nil, fmt.Errorf("last line not terminated")
	}
	var out []ipxeLine
	for n, raw := range strings.Split(strings.TrimSuffix(string(script), "\n"), "\n")[1:] {
		for i := 0; i < len(raw); i++ {
			if b := raw[i]; b < 0x20 || b == 0x7f {
				return nil, fmt.Errorf("line %d: control byte 0x%02x", n+2, b)
			}
		}
		if strings.HasSuffix(raw, "\\") {
			return nil, fmt.Errorf("line %d: continuation", n+2)
		}
		var l ipxeLine
		cmd := strings.TrimLeftFunc(raw, func(r rune) bool { return r < 0x80 && isIPXESpace(byte(r)) })
		if strings.HasPrefix(cmd, ":") {
			end := strings.IndexFunc(cmd, func(r rune) bool { return r < 0x80 && isIPXESpace(byte(r)) })
			if end < 0 {
				end = len(cmd)
			}
			l.Label, cmd = cmd[1:end], cmd[end:]
		}
		tokens := splitIPXE(cmd)
		cur := ipxeCmd{}
		for i, t := range tokens {
			if t[0] == '#' {
				l.Comment = strings.Join(tokens[i:], " ")
				break
			}
			if t == "||" || t == "&&" || t == ";" {
				cur.Sep = t
				l.Cmds = append(l.Cmds, cur)
				cur = ipxeCmd{}
				continue
			}
			cur.Argv = append(cur.Argv, t)
		}
		if len(cur.Argv) > 0 {
			l.Cmds = append(l.Cmds, cur)
		}
		out = append(out, l)
	}
	return out, nil
}

// splitIPXE splits at iPXE's isspace: no quotes, no escapes.
func splitIPXE(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		for i < len(s) && isIPXESpace(s[i]) {
			i++
		}
		j := i
		for j < len(s) && !isIPXESpace(s[j]) {
			j++
		}
		if j > i {
			out = append(out, s[i:j])
		}
		i = j
	}
	return out
}

// expansions returns the "${...}" references in a token, as expand_settings finds them.
func expansions(tok string) []string {
	var out []string
	for {
		start := strings.Index(tok, "${")
		if start < 0 {
			return out
		}
		end := strings.IndexByte(tok[start:], '}')
		if end < 0 {
			return out
		}
		out = append(out, tok[start+2:start+end])
		tok = tok[start+end+1:]
	}
}

// linuxArgs splits a kernel command line the way Linux's next_arg does, refusing quotes
// (the renderer never writes one, and a quote is what would merge words).
func linuxArgs(cmdline string) ([]string, error) {
	if strings.ContainsRune(cmdline, '"') {
		return nil, fmt.Errorf("quote in kernel command line")
	}
	isSpace := func(b byte) bool { return isIPXESpace(b) || b == 0xa0 }
	var out []string
	for i := 0; i < len(cmdline); {
		for i < len(cmdline) && isSpace(cmdline[i]) {
			i++
		}
		j := i
		for j < len(cmdline) && !isSpace(cmdline[j]) {
			j++
		}
		if j > i {
			out = append(out, cmdline[i:j])
		}
		i = j
	}
	return out, nil
}
