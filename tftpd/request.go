package tftpd

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"strings"
)

// TFTP opcodes (RFC 1350, RFC 2347).
const (
	opRRQ   = 1
	opWRQ   = 2
	opDATA  = 3
	opACK   = 4
	opERROR = 5
	opOACK  = 6
)

// TFTP error codes (RFC 1350, RFC 2347).
const (
	codeUndefined    = 0
	codeNotFound     = 1
	codeAccess       = 2
	codeIllegalOp    = 4
	codeOptionRefuse = 8
)

// maxOptions bounds the options read from one request; more are ignored.
const maxOptions = 16

// request is a read or write request as it came from the network.
type request struct {
	Op       uint16
	Filename string   // as sent, never containing NUL
	Mode     string   // ASCII lower-cased
	Options  []option // names ASCII lower-cased, first of each name only, in order
}

type option struct{ Name, Value string }

// parseRequest reads an RRQ or WRQ: opcode, filename NUL, mode NUL, then name NUL value NUL
// pairs. Filename and mode must be non-empty and terminated; an unterminated trailing option
// and empty option names (padding) are ignored, as is every option past maxOptions.
func parseRequest(b []byte) (request, error) {
	if len(b) < 2 {
		return request{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	op := binary.BigEndian.Uint16(b)
	if op != opRRQ && op != opWRQ {
		return request{}, fmt.Errorf("%w: opcode %d on the listening socket", ErrMalformed, op)
	}
	name, rest, ok := cutNUL(b[2:])
	if !ok || len(name) == 0 {
		return request{}, fmt.Errorf("%w: no filename", ErrMalformed)
	}
	mode, rest, ok := cutNUL(rest)
	if !ok || len(mode) == 0 {
		return request{}, fmt.Errorf("%w: no mode", ErrMalformed)
	}
	r := request{Op: op, Filename: string(name), Mode: asciiLower(mode)}
	for len(rest) > 0 && len(r.Options) < maxOptions {
		n, afterName, ok := cutNUL(rest)
		if !ok {
			break
		}
		v, afterValue, ok := cutNUL(afterName)
		if !ok {
			break
		}
		rest = afterValue
		if len(n) == 0 {
			continue
		}
		on := asciiLower(n)
		if _, dup := r.option(on); dup {
			continue
		}
		r.Options = append(r.Options, option{Name: on, Value: string(v)})
	}
	return r, nil
}

// option returns the value of the named option (lower case).
func (r request) option(name string) (string, bool) {
	for _, o := range r.Options {
		if o.Name == name {
			return o.Value, true
		}
	}
	return "", false
}

// marshal encodes r in the form parseRequest reads.
func (r request) marshal() []byte {
	n := 2 + len(r.Filename) + 1 + len(r.Mode) + 1
	for _, o := range r.Options {
		n += len(o.Name) + len(o.Value) + 2
	}
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint16(b, r.Op)
	b = append(append(b, r.Filename...), 0)
	b = append(append(b, r.Mode...), 0)
	for _, o := range r.Options {
		b = append(append(b, o.Name...), 0)
		b = append(append(b, o.Value...), 0)
	}
	return b
}

func cutNUL(b []byte) (field, rest []byte, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return nil, b, false
	}
	return b[:i], b[i+1:], true
}

func asciiLower(b []byte) string {
	s := []byte(string(b))
	for i, c := range s {
		if 'A' <= c && c <= 'Z' {
			s[i] = c + 'a' - 'A'
		}
	}
	return string(s)
}

// parseDecimal reads an option value of 1 to 10 ASCII digits.
func parseDecimal(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 10 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// cleanName maps a requested filename to a path under the root, or refuses it.
func cleanName(name string, maxLen int) (string, error) {
	if len(name) > maxLen {
		return "", fmt.Errorf("%w: name of %d bytes (at most %d)", ErrDenied, len(name), maxLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == 0x7f {
			return "", fmt.Errorf("%w: control character in name", ErrDenied)
		}
	}
	p := strings.TrimLeft(strings.ReplaceAll(name, `\`, "/"), "/")
	if p == "" || p == "." || !fs.ValidPath(p) {
		return "", fmt.Errorf("%w: name %q is not a path inside the root", ErrDenied, name)
	}
	return p, nil
}

// errorPacket encodes an ERROR packet.
func errorPacket(code uint16, msg string) []byte {
	b := make([]byte, 0, 5+len(msg))
	b = binary.BigEndian.AppendUint16(b, opERROR)
	b = binary.BigEndian.AppendUint16(b, code)
	return append(append(b, msg...), 0)
}
