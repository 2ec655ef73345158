package assertion_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/hwid"
)

var addrCmp = cmp.Comparer(func(x, y netip.Addr) bool { return x == y })

func TestRoundTrip(t *testing.T) {
	base := assertion.Assertion{
		Site: "site-a", Agent: "agent-a1", Epoch: 7, MAC: hwid.MAC{0x3c, 0xec, 0xef, 0x12, 0x34, 0x56},
		IP: netip.MustParseAddr("192.0.2.20"), UUID: hwid.UUID{1, 2, 3}, Workflow: "wf-1",
		IssuedAt: t0, NotAfter: t0.Add(15 * time.Minute),
	}
	tests := []struct {
		name   string
		change func(*assertion.Assertion)
		len    int // encoded length
	}{
		{"typical", func(*assertion.Assertion) {}, 1 + 7 + 9 + 8 + 6 + 5 + 17 + 5 + 16},
		{"no-ip", func(a *assertion.Assertion) { a.IP = netip.Addr{} }, 1 + 7 + 9 + 8 + 6 + 1 + 17 + 5 + 16},
		{"ipv6", func(a *assertion.Assertion) { a.IP = netip.MustParseAddr("2001:db8::7") }, 1 + 7 + 9 + 8 + 6 + 17 + 17 + 5 + 16},
		{"ipv4-mapped-ipv6", func(a *assertion.Assertion) { a.IP = netip.MustParseAddr("::ffff:192.0.2.20") }, 1 + 7 + 9 + 8 + 6 + 17 + 17 + 5 + 16},
		{"no-uuid", func(a *assertion.Assertion) { a.UUID = hwid.UUID{} }, 1 + 7 + 9 + 8 + 6 + 5 + 1 + 5 + 16},
		{"no-workflow", func(a *assertion.Assertion) { a.Workflow = "" }, 1 + 7 + 9 + 8 + 6 + 5 + 17 + 1 + 16},
		{"max-epoch", func(a *assertion.Assertion) { a.Epoch = math.MaxUint64 }, 1 + 7 + 9 + 8 + 6 + 5 + 17 + 5 + 16},
		{"negative-times", func(a *assertion.Assertion) {
			a.IssuedAt, a.NotAfter = time.Unix(-5, 0).UTC(), time.Unix(-1, 0).UTC()
		}, 1 + 7 + 9 + 8 + 6 + 5 + 17 + 5 + 16},
		{"all-id-bytes", func(a *assertion.Assertion) {
			a.Site = "AZaz09._:-"
			a.Agent = strings.Repeat("n", assertion.MaxIDLen)
		}, 1 + 11 + 57 + 8 + 6 + 5 + 17 + 5 + 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := base
			tt.change(&want)
			b, err := want.MarshalBinary()
			if err != nil {
				t.Fatalf("MarshalBinary: %v", err)
			}
			if len(b) != tt.len {
				t.Errorf("encoded %d bytes, want %d", len(b), tt.len)
			}
			var got assertion.Assertion
			if err := got.UnmarshalBinary(b); err != nil {
				t.Fatalf("UnmarshalBinary: %v", err)
			}
			if diff := cmp.Diff(want, got, addrCmp); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			// AppendBinary appends and leaves the prefix alone.
			ab, err := want.AppendBinary([]byte("xy"))
			if err != nil || !bytes.Equal(ab, append([]byte("xy"), b...)) {
				t.Errorf("AppendBinary = %x, %v", ab, err)
			}
		})
	}
}

// TestFieldOffsets pins the layout documented in doc.go on one assertion.
func TestFieldOffsets(t *testing.T) {
	a := assertion.Assertion{
		Site: "S", Agent: "AG", Epoch: 0x0102030405060708, MAC: hwid.MAC{0xa, 0xb, 0xc, 0xd, 0xe, 0xf},
		IP: netip.MustParseAddr("198.51.100.9"), UUID: hwid.UUID{15: 0x42}, Workflow: "W",
		IssuedAt: time.Unix(0x11223344, 0), NotAfter: time.Unix(-2, 0),
	}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{1, 1, 'S', 2, 'A', 'G', 1, 2, 3, 4, 5, 6, 7, 8, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf,
		4, 198, 51, 100, 9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42, 1, 'W'}
	want = binary.BigEndian.AppendUint64(want, 0x11223344)
	want = binary.BigEndian.AppendUint64(want, 0xfffffffffffffffe)
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("encoding (-want +got):\n%s", diff)
	}
}

func TestMarshalInvalid(t *testing.T) {
	good := assertion.Assertion{Site: "s", Agent: "a"}
	if _, err := good.MarshalBinary(); err != nil {
		t.Fatalf("minimal assertion: %v", err)
	}
	tests := []struct {
		name   string
		change func(*assertion.Assertion)
	}{
		{"empty-site", func(a *assertion.Assertion) { a.Site = "" }},
		{"empty-agent", func(a *assertion.Assertion) { a.Agent = "" }},
		{"long-site", func(a *assertion.Assertion) { a.Site = strings.Repeat("s", assertion.MaxIDLen+1) }},
		{"long-workflow", func(a *assertion.Assertion) { a.Workflow = strings.Repeat("w", assertion.MaxIDLen+1) }},
		{"newline-in-workflow", func(a *assertion.Assertion) { a.Workflow = "wf\n" }},
		{"space-in-agent", func(a *assertion.Assertion) { a.Agent = "agent a" }},
		{"non-ascii-site", func(a *assertion.Assertion) { a.Site = "sité" }},
		{"zoned-ip", func(a *assertion.Assertion) { a.IP = netip.MustParseAddr("fe80::1%eth0") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := good
			tt.change(&a)
			if b, err := a.MarshalBinary(); !errors.Is(err, assertion.ErrInvalid) {
				t.Errorf("MarshalBinary = %x, %v; want ErrInvalid", b, err)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	s := newSite(t)
	text := s.issue(t)
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := assertion.Decode(text); err != nil {
		t.Fatalf("Decode(issued text): %v", err)
	}
	payloadLen := len(raw) - 64
	// Every strict prefix of the payload is truncated.
	for n := 0; n < payloadLen; n++ {
		var a assertion.Assertion
		if err := a.UnmarshalBinary(raw[:n]); !errors.Is(err, assertion.ErrMalformed) {
			t.Fatalf("UnmarshalBinary of %d of %d bytes = %v, want ErrMalformed", n, payloadLen, err)
		}
	}
	var a assertion.Assertion
	if err := a.UnmarshalBinary(raw); !errors.Is(err, assertion.ErrMalformed) {
		t.Errorf("UnmarshalBinary with the signature after it = %v, want ErrMalformed (trailing bytes)", err)
	}
	// Offsets in the issued payload: version 0, site "site-a" 1..7, agent "agent-a1" 8..16,
	// epoch 17..24, MAC 25..30, IP length 31, IP 32..35, UUID presence 36, UUID 37..52.
	mutate := func(f func(b []byte) []byte) string {
		b := f(append([]byte(nil), raw...))
		return base64.RawURLEncoding.EncodeToString(b)
	}
	tests := []struct {
		name string
		text string
	}{
		{"ip-length-5", mutate(func(b []byte) []byte { b[31] = 5; return b })},
		{"ip-length-16-short", mutate(func(b []byte) []byte { b[31] = 16; return b[:40] })},
		{"uuid-presence-2", mutate(func(b []byte) []byte { b[36] = 2; return b })},
		{"uuid-present-zero", mutate(func(b []byte) []byte { clear(b[37:53]); return b })},
		{"site-length-255", mutate(func(b []byte) []byte { b[1] = 255; return b })},
		{"agent-nul-byte", mutate(func(b []byte) []byte { b[9] = 0; return b })},
		{"too-long", strings.Repeat("A", assertion.MaxTextLen+1)},
		{"not-base64", "!!!!"},
		{"padded", text + "=="},
		{"crlf", text[:100] + "\r\n" + text[100:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := assertion.Decode(tt.text); !errors.Is(err, assertion.ErrMalformed) {
				t.Errorf("Decode = %+v, %v; want ErrMalformed", got.Assertion, err)
			}
		})
	}
}

func TestIssuedTextFitsKernelCommandLine(t *testing.T) {
	s := newSite(t)
	text := s.issue(t)
	if len(text) > 400 {
		t.Errorf("issued text of %d characters", len(text))
	}
	for _, c := range text {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			t.Fatalf("text holds %q, not base64url", c)
		}
	}
}

// FuzzDecode: arbitrary text never panics; whatever decodes re-encodes to the same text
// (one assertion, one text), and decode(encode(x)) == x.
func FuzzDecode(f *testing.F) {
	data, err := os.ReadFile(vectorsFile)
	if err != nil {
		f.Fatal(err)
	}
	var file vectorFile
	if err := json.Unmarshal(data, &file); err != nil {
		f.Fatal(err)
	}
	for _, v := range file.Vectors {
		f.Add(v.Text)
	}
	for _, v := range file.Invalid {
		f.Add(v.Text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := assertion.Decode(text)
		if err != nil {
			if !errors.Is(err, assertion.ErrMalformed) {
				t.Fatalf("Decode error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(text) > assertion.MaxTextLen || len(s.Signature) == 0 || len(s.Signature) > assertion.MaxSignatureLen {
			t.Fatalf("decoded out-of-bounds text: %d chars, %d-byte signature", len(text), len(s.Signature))
		}
		payload, err := s.Assertion.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary of decoded %+v: %v", s.Assertion, err)
		}
		if !bytes.Equal(payload, s.Payload) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", payload, s.Payload)
		}
		if s.Text() != text {
			t.Fatalf("text does not round trip:\n got %s\nwant %s", s.Text(), text)
		}
		var again assertion.Assertion
		if err := again.UnmarshalBinary(payload); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.Assertion, again, addrCmp); diff != "" {
			t.Fatalf("decode(encode(x)) != x (-x +got):\n%s", diff)
		}
	})
}

// FuzzRoundTrip builds assertions from arbitrary fields: each either fails to encode with
// ErrInvalid or decodes back to itself, and its signed text decodes too.
func FuzzRoundTrip(f *testing.F) {
	f.Add("site-a", "agent-a1", uint64(7), []byte{1, 2, 3, 4, 5, 6}, []byte{192, 0, 2, 1}, []byte{}, "wf", int64(1772366400), int64(900), []byte{1})
	f.Add("s", "a", uint64(0), []byte{}, []byte{}, make([]byte, 16), "", int64(-1), int64(-5), []byte{})
	f.Fuzz(func(t *testing.T, site, agent string, epoch uint64, mac, ip, uuid []byte, wf string, issued, life int64, sig []byte) {
		x := assertion.Assertion{Site: site, Agent: agent, Epoch: epoch, Workflow: wf,
			IssuedAt: time.Unix(issued, 0).UTC(), NotAfter: time.Unix(issued+life, 0).UTC()}
		copy(x.MAC[:], mac)
		if a, ok := netip.AddrFromSlice(ip); ok {
			x.IP = a
		}
		copy(x.UUID[:], uuid)
		payload, err := x.MarshalBinary()
		if err != nil {
			if !errors.Is(err, assertion.ErrInvalid) {
				t.Fatalf("MarshalBinary error %v does not wrap ErrInvalid", err)
			}
			return
		}
		var got assertion.Assertion
		if err := got.UnmarshalBinary(payload); err != nil {
			t.Fatalf("UnmarshalBinary(MarshalBinary(%+v)): %v", x, err)
		}
		if diff := cmp.Diff(x, got, addrCmp); diff != "" {
			t.Fatalf("decode(encode(x)) != x (-x +got):\n%s", diff)
		}
		if len(sig) == 0 || len(sig) > assertion.MaxSignatureLen {
			return
		}
		text := assertion.Signed{Payload: payload, Signature: sig}.Text()
		s, err := assertion.Decode(text)
		if err != nil {
			t.Fatalf("Decode(text of %+v): %v", x, err)
		}
		if diff := cmp.Diff(x, s.Assertion, addrCmp); diff != "" {
			t.Fatalf("Decode (-x +got):\n%s", diff)
		}
		if !bytes.Equal(s.Signature, sig) {
			t.Fatalf("signature %x, want %x", s.Signature, sig)
		}
	})
}

// FuzzVerify: arbitrary text presented to a Verifier never panics and never is admitted
// (the fuzzer cannot forge an Ed25519 signature), and every refusal has a reason.
func FuzzVerify(f *testing.F) {
	s := newSite(f)
	f.Add(s.issue(f))
	f.Add(signText(f, s.keyA1, "image-grant", s.assertionFor()))
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		s := newSite(t)
		if valid := s.issue(t); text == valid {
			return // the seed itself is genuine
		}
		a, err := s.verifier.Verify(context.Background(), text, s.join)
		if err == nil {
			t.Fatalf("admitted %q as %+v", text, a)
		}
		if assertion.ReasonOf(err) == "" {
			t.Fatalf("refusal without a reason: %v", err)
		}
	})
}
