package syslogd

import (
	"bytes"
	"strconv"
)

// MaxMessage is the longest datagram read; a longer one is cut (RFC 5426 asks receivers
// to take 480 bytes at least and recommends 2048).
const MaxMessage = 2048

// Format says which syslog form a message was in.
type Format uint8

// Formats.
const (
	RFC3164 Format = iota + 1 // "<PRI>[TIMESTAMP ][HOSTNAME ]TAG: MSG", iPXE's ("<14>ipxe: ...")
	RFC5424                   // "<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID SD MSG"
)

// Message is one parsed syslog message. Its strings are not yet cleaned: Text is put
// through CleanText before it is kept.
type Message struct {
	Format   Format
	Facility uint8
	Severity uint8
	Hostname string // "" or "-" when absent
	App      string // RFC 3164's tag, RFC 5424's APP-NAME
	Text     string
}

var severityNames = [8]string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}

// SeverityName returns the RFC 5424 keyword of severity s ("err", "info", ...).
func SeverityName(s uint8) string {
	if int(s) < len(severityNames) {
		return severityNames[s]
	}
	return "severity-" + strconv.Itoa(int(s))
}

// Parse parses one syslog datagram, RFC 5424 or RFC 3164 (the BSD form, which iPXE's
// syslog console sends). Anything else is a *ParseError wrapping ErrMalformed.
func Parse(b []byte) (Message, error) {
	var m Message
	b = bytes.TrimRight(b, "\x00\r\n")
	if len(b) < 3 || b[0] != '<' {
		return m, malformed("pri", "no '<'")
	}
	end := bytes.IndexByte(b[:min(len(b), 5)], '>')
	if end < 2 {
		return m, malformed("pri", "no '>' within 3 digits")
	}
	pri := 0
	for _, c := range b[1:end] {
		if c < '0' || c > '9' {
			return m, malformed("pri", "not a number")
		}
		pri = pri*10 + int(c-'0')
	}
	if pri > 191 || (end > 2 && b[1] == '0') {
		return m, malformed("pri", "out of range")
	}
	m.Facility, m.Severity = uint8(pri/8), uint8(pri%8)
	rest := b[end+1:]
	if len(rest) >= 2 && rest[0] == '1' && rest[1] == ' ' {
		return parse5424(m, rest[2:])
	}
	return parse3164(m, rest)
}

func parse5424(m Message, b []byte) (Message, error) {
	m.Format = RFC5424
	var fields [5][]byte // TIMESTAMP HOSTNAME APP-NAME PROCID MSGID
	for i := range fields {
		sp := bytes.IndexByte(b, ' ')
		if sp <= 0 {
			if i == len(fields)-1 && len(b) > 0 { // MSGID last, no SD nor MSG
				fields[i], b = b, nil
				break
			}
			return m, malformed("header", "field "+strconv.Itoa(i+2)+" missing")
		}
		fields[i], b = b[:sp], b[sp+1:]
	}
	m.Hostname, m.App = string(fields[1]), string(fields[2])
	// structured data: "-" or one or more [..] elements
	switch {
	case len(b) == 0:
	case b[0] == '-':
		b = b[1:]
	case b[0] == '[':
		for len(b) > 0 && b[0] == '[' {
			i, esc := 1, false
			for ; i < len(b); i++ {
				if esc {
					esc = false
					continue
				}
				if b[i] == '\\' {
					esc = true
				} else if b[i] == ']' {
					break
				}
			}
			if i >= len(b) {
				return m, malformed("structured-data", "unterminated")
			}
			b = b[i+1:]
		}
	default:
		return m, malformed("structured-data", "neither '-' nor '['")
	}
	b = bytes.TrimPrefix(b, []byte(" "))
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // the BOM RFC 5424 allows before MSG
	m.Text = string(b)
	return m, nil
}

var months = []string{"Jan ", "Feb ", "Mar ", "Apr ", "May ", "Jun ", "Jul ", "Aug ", "Sep ", "Oct ", "Nov ", "Dec "}

func parse3164(m Message, b []byte) (Message, error) {
	m.Format = RFC3164
	// an optional "Mmm dd hh:mm:ss " timestamp
	if len(b) >= 16 && b[15] == ' ' && b[9] == ':' && b[12] == ':' {
		for _, mo := range months {
			if bytes.HasPrefix(b, []byte(mo)) {
				b = b[16:]
				break
			}
		}
	}
	// "[HOSTNAME ]TAG: MSG": the tag is the word before the first ": " when there are at
	// most two words before it; else the whole is the message.
	if colon := bytes.Index(b, []byte(": ")); colon > 0 {
		head := b[:colon]
		switch words := bytes.Fields(head); {
		case len(words) == 1 && len(head) == len(words[0]):
			m.App, b = string(head), b[colon+2:]
		case len(words) == 2 && bytes.Count(head, []byte(" ")) == 1:
			m.Hostname, m.App, b = string(words[0]), string(words[1]), b[colon+2:]
		}
	}
	m.Text = string(b)
	return m, nil
}

// CleanText returns s without ANSI escape sequences (iPXE's console colours) and with
// everything else that is not printable text removed (bootevents.Printable), at most max
// bytes.
func CleanText(s string, max int) string {
	if bytes.IndexByte([]byte(s), 0x1b) < 0 {
		return printable(s, max)
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != 0x1b {
			out = append(out, c)
			continue
		}
		if i+1 < len(s) && s[i+1] == '[' { // CSI: parameters, then a final byte 0x40-0x7e
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		i++ // ESC and the one byte after it
	}
	return printable(string(out), max)
}
