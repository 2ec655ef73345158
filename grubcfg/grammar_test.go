package grubcfg_test

import (
	"fmt"
	"strings"
)

// This file reads configurations the way GRUB's script lexer does (grub-core/script/yylex.l:
// blanks, comments, the special symbols, single quotes with nothing special inside, double
// quotes with \$ \\ \" escapes and $name / ${name} expansion, unquoted escapes and variables),
// but strictly: whatever the renderer should never produce (a quote spanning lines, an
// operator other than the ';' before "then", a glob character outside quotes, an unquoted
// variable) is an error rather than something to interpret.

// grubWord is one word after quote removal. Vars are the variables it expands, in order;
// Bare reports that it was written entirely without quotes or escapes (only then can it be a
// reserved word).
type grubWord struct {
	Text string
	Vars []string
	Bare bool
}

// grubCmd is one simple command: its words, and whether a ';' ended it.
type grubCmd struct {
	Words []grubWord
	Semi  bool
}

func isBlank(b byte) bool { return b == ' ' || b == '\t' }

// grubChar is yylex.l's CHAR: what may stand unquoted in a word.
func grubChar(b byte) bool {
	return !strings.ContainsRune("{}|&$;<> \t\n'\"\\", rune(b))
}

func isNameByte(b byte, first bool) bool {
	alpha := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '_'
	return alpha || !first && b >= '0' && b <= '9'
}

// lexGRUB splits a configuration into simple commands.
func lexGRUB(cfg string) ([]grubCmd, error) {
	if !strings.HasSuffix(cfg, "\n") {
		return nil, fmt.Errorf("last line not terminated")
	}
	var cmds []grubCmd
	for n, line := range strings.Split(strings.TrimSuffix(cfg, "\n"), "\n") {
		for i := 0; i < len(line); i++ {
			if b := line[i]; (b < 0x20 && b != '\t') || b >= 0x7f {
				return nil, fmt.Errorf("line %d: byte 0x%02x", n+1, b)
			}
		}
		var cur grubCmd
		i := 0
		for i < len(line) {
			for i < len(line) && isBlank(line[i]) {
				i++
			}
			if i == len(line) {
				break
			}
			if line[i] == '#' {
				break // a comment runs to the end of the line
			}
			if line[i] == ';' {
				if i+1 < len(line) && line[i+1] == ';' {
					return nil, fmt.Errorf("line %d: ';;'", n+1)
				}
				cur.Semi = true
				cmds = append(cmds, cur)
				cur = grubCmd{}
				i++
				continue
			}
			if strings.IndexByte("{}|&<>", line[i]) >= 0 {
				return nil, fmt.Errorf("line %d: operator %q", n+1, line[i])
			}
			w, next, err := lexWord(line, i)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", n+1, err)
			}
			cur.Words = append(cur.Words, w)
			i = next
		}
		if len(cur.Words) > 0 {
			cmds = append(cmds, cur)
		} else if cur.Semi {
			return nil, fmt.Errorf("line %d: empty command", n+1)
		}
	}
	return cmds, nil
}

// lexWord reads one word starting at line[i].
func lexWord(line string, i int) (grubWord, int, error) {
	var w grubWord
	var b strings.Builder
	w.Bare = true
	for i < len(line) {
		c := line[i]
		switch {
		case grubChar(c):
			if strings.IndexByte("*?[", c) >= 0 {
				return w, 0, fmt.Errorf("glob character %q outside quotes", c)
			}
			b.WriteByte(c)
			i++
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return w, 0, fmt.Errorf("single quote not closed on its line")
			}
			b.WriteString(line[i+1 : i+1+end])
			i += end + 2
			w.Bare = false
		case c == '"':
			i++
			closed := false
			for i < len(line) && !closed {
				switch d := line[i]; d {
				case '"':
					closed = true
					i++
				case '\\':
					if i+1 >= len(line) {
						return w, 0, fmt.Errorf("backslash at the end of a line")
					}
					if e := line[i+1]; e == '$' || e == '\\' || e == '"' {
						b.WriteByte(e)
					} else {
						b.WriteByte('\\')
						b.WriteByte(e)
					}
					i += 2
				case '$':
					name, next, err := lexVar(line, i)
					if err != nil {
						return w, 0, err
					}
					w.Vars = append(w.Vars, name)
					b.WriteString("${" + name + "}")
					i = next
				default:
					b.WriteByte(d)
					i++
				}
			}
			if !closed {
				return w, 0, fmt.Errorf("double quote not closed on its line")
			}
			w.Bare = false
		case c == '\\':
			return w, 0, fmt.Errorf("unquoted backslash")
		case c == '$':
			return w, 0, fmt.Errorf("unquoted variable (split into words when expanded)")
		default:
			// a blank or an operator ends the word
			return w.with(b.String()), i, nil
		}
	}
	return w.with(b.String()), i, nil
}

func (w grubWord) with(text string) grubWord { w.Text = text; return w }

// lexVar reads $name or ${name} at line[i] (NAME only: the renderer writes no special or
// positional variables).
func lexVar(line string, i int) (string, int, error) {
	i++
	brace := i < len(line) && line[i] == '{'
	if brace {
		i++
	}
	start := i
	for i < len(line) && isNameByte(line[i], i == start) {
		i++
	}
	name := line[start:i]
	if name == "" {
		return "", 0, fmt.Errorf("'$' without a variable name")
	}
	if brace {
		if i >= len(line) || line[i] != '}' {
			return "", 0, fmt.Errorf("${ not closed")
		}
		i++
	}
	return name, i, nil
}

// grubStep is one command as GRUB would run it: its name and arguments, and the depth of
// "if ... then" it stands in.
type grubStep struct {
	Depth int
	Argv  []string
	Vars  []string
	// Cond: the command is an if's condition.
	Cond bool
}

var reserved = map[string]bool{"case": true, "do": true, "done": true, "elif": true, "else": true,
	"esac": true, "fi": true, "for": true, "if": true, "in": true, "select": true, "then": true,
	"until": true, "while": true, "function": true, "[[": true, "]]": true}

// stepsGRUB checks the if/then/fi structure and returns the commands in order.
func stepsGRUB(cfg string) ([]grubStep, error) {
	cmds, err := lexGRUB(cfg)
	if err != nil {
		return nil, err
	}
	var out []grubStep
	depth := 0
	for k, c := range cmds {
		ws := c.Words
		first := ws[0]
		switch {
		case first.Bare && first.Text == "if":
			if !c.Semi || len(ws) < 2 {
				return nil, fmt.Errorf("command %d: an if must be 'if CMD ...;'", k)
			}
			if k+1 >= len(cmds) || len(cmds[k+1].Words) != 1 || cmds[k+1].Words[0].Text != "then" || !cmds[k+1].Words[0].Bare {
				return nil, fmt.Errorf("command %d: if without then", k)
			}
			ws = ws[1:]
			depth++
			out = append(out, step(depth-1, ws, true))
			continue
		case first.Bare && first.Text == "then":
			if len(ws) != 1 || c.Semi {
				return nil, fmt.Errorf("command %d: then with words after it", k)
			}
			continue
		case first.Bare && first.Text == "fi":
			if len(ws) != 1 || depth == 0 {
				return nil, fmt.Errorf("command %d: unbalanced fi", k)
			}
			depth--
			continue
		case c.Semi:
			return nil, fmt.Errorf("command %d: ';' outside an if", k)
		}
		for _, w := range ws {
			if w.Bare && reserved[w.Text] {
				return nil, fmt.Errorf("command %d: reserved word %q", k, w.Text)
			}
		}
		out = append(out, step(depth, ws, false))
	}
	if depth != 0 {
		return nil, fmt.Errorf("%d if without fi", depth)
	}
	return out, nil
}

func step(depth int, ws []grubWord, cond bool) grubStep {
	s := grubStep{Depth: depth, Cond: cond}
	for _, w := range ws {
		s.Argv = append(s.Argv, w.Text)
		s.Vars = append(s.Vars, w.Vars...)
	}
	return s
}
