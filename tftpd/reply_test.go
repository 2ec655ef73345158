package tftpd

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type reply struct {
	Op, Num uint16
	Msg     string
}

func TestParseReply(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want reply
	}{
		{"ack", []byte{0, 4, 0x12, 0x34}, reply{opACK, 0x1234, ""}},
		{"ack with trailing bytes", []byte{0, 4, 0, 7, 9, 9}, reply{opACK, 7, ""}},
		{"error 8", append([]byte{0, 5, 0, 8}, "user aborted\x00"...), reply{opERROR, 8, "user aborted"}},
		{"error unterminated", append([]byte{0, 5, 0, 0}, "bye"...), reply{opERROR, 0, "bye"}},
		{"error text stops at NUL", append([]byte{0, 5, 0, 1}, "a\x00b\x00"...), reply{opERROR, 1, "a"}},
		{"error without text", []byte{0, 5, 0, 3}, reply{opERROR, 3, ""}},
		{"short ack", []byte{0, 4, 0}, reply{}},
		{"data", []byte{0, 3, 0, 1, 'x'}, reply{}},
		{"rrq", append([]byte{0, 1}, "f\x00octet\x00"...), reply{}},
		{"empty", nil, reply{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op, num, msg := parseReply(tt.in)
			if diff := cmp.Diff(tt.want, reply{op, num, msg}); diff != "" {
				t.Errorf("parseReply(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// FuzzParseReply: any datagram on a transfer's socket is an ACK, an ERROR or nothing; the
// fields come from the datagram's own bytes.
func FuzzParseReply(f *testing.F) {
	f.Add([]byte{0, 4, 0, 1})
	f.Add(append([]byte{0, 5, 0, 8}, "user aborted\x00"...))
	f.Add([]byte{0, 5, 0, 0})
	f.Add([]byte{0, 3, 0, 1, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		op, num, msg := parseReply(b)
		switch op {
		case 0:
			if num != 0 || msg != "" {
				t.Fatalf("nothing parsed, yet num %d msg %q", num, msg)
			}
			if len(b) >= 4 && (binary.BigEndian.Uint16(b) == opACK || binary.BigEndian.Uint16(b) == opERROR) {
				t.Fatalf("%q not parsed", b)
			}
		case opACK, opERROR:
			if len(b) < 4 || binary.BigEndian.Uint16(b) != op || binary.BigEndian.Uint16(b[2:]) != num {
				t.Fatalf("%q parsed as op %d num %d", b, op, num)
			}
			if op == opACK && msg != "" || op == opERROR && (!bytes.HasPrefix(b[4:], []byte(msg)) || bytes.IndexByte([]byte(msg), 0) >= 0) {
				t.Fatalf("%q parsed with message %q", b, msg)
			}
		default:
			t.Fatalf("op %d", op)
		}
	})
}
