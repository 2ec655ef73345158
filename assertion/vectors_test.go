package assertion_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json from the definitions in vectors_test.go")

const vectorsFile = "testdata/vectors.json"

// vectorFile is the layout of testdata/vectors.json: plain JSON another implementation can
// read. Integers that may exceed 2^53 (the epoch) are decimal strings.
type vectorFile struct {
	Comment  string         `json:"comment"`
	Purpose  string         `json:"purpose"`
	Vectors  []vector       `json:"vectors"`
	Invalid  []invalidText  `json:"invalid"`
	Unsigned []invalidField `json:"unencodable"`
}

type vector struct {
	Name         string       `json:"name"`
	SeedHex      string       `json:"ed25519_seed_hex"`
	PublicKeyHex string       `json:"ed25519_public_key_hex"`
	Fields       vectorFields `json:"fields"`
	PayloadHex   string       `json:"payload_hex"`
	MessageHex   string       `json:"signed_message_hex"`
	SignatureHex string       `json:"signature_hex"`
	Text         string       `json:"text"`
	TextLen      int          `json:"text_len"`
}

type vectorFields struct {
	Site     string `json:"site"`
	Agent    string `json:"agent"`
	Epoch    string `json:"epoch"`
	MAC      string `json:"mac"`
	IP       string `json:"ip"`   // "" when absent
	UUID     string `json:"uuid"` // "" when absent
	Workflow string `json:"workflow"`
	IssuedAt int64  `json:"issued_at_unix"`
	NotAfter int64  `json:"not_after_unix"`
}

// invalidText is a text that must not decode.
type invalidText struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// invalidField is a field set that must not encode.
type invalidField struct {
	Name   string       `json:"name"`
	Fields vectorFields `json:"fields"`
}

func (f vectorFields) assertion(t *testing.T) assertion.Assertion {
	t.Helper()
	epoch, err := strconv.ParseUint(f.Epoch, 10, 64)
	if err != nil {
		t.Fatalf("epoch %q: %v", f.Epoch, err)
	}
	a := assertion.Assertion{
		Site: f.Site, Agent: f.Agent, Epoch: epoch, MAC: hwid.MustParseMAC(f.MAC), Workflow: f.Workflow,
		IssuedAt: time.Unix(f.IssuedAt, 0).UTC(), NotAfter: time.Unix(f.NotAfter, 0).UTC(),
	}
	if f.IP != "" {
		a.IP = netip.MustParseAddr(f.IP)
	}
	if f.UUID != "" {
		a.UUID = hwid.MustParseUUID(f.UUID)
	}
	return a
}

// vectorDefs are the sources of testdata/vectors.json.
func vectorDefs() (defs []struct {
	name string
	seed byte
	f    vectorFields
}) {
	long := func(prefix string) string { return prefix + strings.Repeat("x", assertion.MaxIDLen-len(prefix)) }
	add := func(name string, seed byte, f vectorFields) {
		defs = append(defs, struct {
			name string
			seed byte
			f    vectorFields
		}{name, seed, f})
	}
	add("typical-ipv4", 0x00, vectorFields{
		Site: "site_01k5w3j8q4xv9m2c7d6e5f4g3h", Agent: "node_01k5w3k2a9b8c7d6e5f4g3h2j1",
		Epoch: "42", MAC: "3c:ec:ef:12:34:56", IP: "192.0.2.20",
		UUID: "4c4c4544-0031-3510-8052-b4c04f4e4b32", Workflow: "wf_01k5w3m7n6p5q4r3s2t1v0w9x8",
		IssuedAt: 1772366400, NotAfter: 1772366400 + 900,
	})
	add("ipv6-no-uuid-no-workflow", 0x20, vectorFields{
		Site: "fsn1", Agent: "agent-2", Epoch: "18446744073709551615", MAC: "52:54:00:00:00:01",
		IP: "2001:db8::1:2", IssuedAt: 1772366400, NotAfter: 1772366400 + 60,
	})
	add("minimal", 0x40, vectorFields{
		Site: "s", Agent: "a", Epoch: "1", MAC: "00:00:00:00:00:00",
		IssuedAt: 0, NotAfter: 1,
	})
	add("maximal-400-characters", 0x60, vectorFields{
		Site: long("site-"), Agent: long("node-"), Epoch: "9007199254740993",
		MAC: "ff:ff:ff:ff:ff:ff", IP: "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
		UUID: "ffffffff-ffff-ffff-ffff-fffffffffffe", Workflow: long("wf-"),
		IssuedAt: 4102444800, NotAfter: 4102444800 + 900,
	})
	return defs
}

func invalidDefs(typical string) []invalidText {
	raw, _ := rawURLDecode(typical)
	enc := func(b []byte) string { return rawURL(b) }
	mut := func(off int, v byte) string {
		b := append([]byte(nil), raw...)
		b[off] = v
		return enc(b)
	}
	payloadLen := len(raw) - ed25519.SignatureSize
	return []invalidText{
		{"empty", ""},
		{"padding", typical + "="},
		{"line-break", typical[:40] + "\n" + typical[40:]},
		{"standard-base64-alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(typical + "-_")},
		{"version-2", mut(0, 2)},
		{"version-0", mut(0, 0)},
		{"site-length-0", mut(1, 0)},
		{"site-length-57", mut(1, 57)},
		{"site-byte-space", mut(2, ' ')},
		{"no-signature", enc(raw[:payloadLen])},
		{"signature-105-bytes", enc(append(append([]byte(nil), raw...), make([]byte, 105-ed25519.SignatureSize)...))},
		{"truncated-in-payload", enc(raw[:payloadLen/2])},
		{"nonzero-unused-bits", typical[:len(typical)-1] + nextB64(typical[len(typical)-1])},
	}
}

func TestVectors(t *testing.T) {
	if *update {
		writeVectors(t)
	}
	data, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var file vectorFile
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if file.Purpose != assertion.Purpose {
		t.Errorf("purpose %q, want %q", file.Purpose, assertion.Purpose)
	}
	if len(file.Vectors) < 4 || len(file.Invalid) < 10 || len(file.Unsigned) < 3 {
		t.Fatalf("vectors file holds %d vectors, %d invalid texts, %d unencodable", len(file.Vectors), len(file.Invalid), len(file.Unsigned))
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			seed, err := hex.DecodeString(v.SeedHex)
			if err != nil || len(seed) != ed25519.SeedSize {
				t.Fatalf("seed %q: %v", v.SeedHex, err)
			}
			key := ed25519.NewKeyFromSeed(seed)
			if got := hex.EncodeToString(key.Public().(ed25519.PublicKey)); got != v.PublicKeyHex {
				t.Errorf("public key %s, want %s", got, v.PublicKeyHex)
			}
			a := v.Fields.assertion(t)
			payload, err := a.MarshalBinary()
			if err != nil {
				t.Fatalf("MarshalBinary: %v", err)
			}
			if got := hex.EncodeToString(payload); got != v.PayloadHex {
				t.Errorf("payload\n got %s\nwant %s", got, v.PayloadHex)
			}
			msg, _ := hex.DecodeString(v.MessageHex)
			if want := append([]byte("siteboot/discovery-assertion\x00"), payload...); string(msg) != string(want) {
				t.Errorf("signed message is not the purpose prefix and the payload")
			}
			sig, _ := hex.DecodeString(v.SignatureHex)
			if !ed25519.Verify(key.Public().(ed25519.PublicKey), msg, sig) {
				t.Errorf("signature does not verify over the signed message")
			}

			// The Issuer, given the vector's fields and clock, produces exactly the text.
			is := &assertion.Issuer{
				Site: a.Site, Agent: a.Agent, Signer: key,
				Lifetime: a.NotAfter.Sub(a.IssuedAt),
				Clock:    clocktest.New(a.IssuedAt.Add(999 * time.Millisecond)),
			}
			text, err := is.Issue(context.Background(), assertion.Fields{
				Epoch: a.Epoch, MAC: a.MAC, IP: a.IP, UUID: a.UUID, Workflow: a.Workflow,
			})
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			if text != v.Text || len(text) != v.TextLen {
				t.Errorf("text\n got %s (%d)\nwant %s (%d)", text, len(text), v.Text, v.TextLen)
			}

			s, err := assertion.Decode(v.Text)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(a, s.Assertion, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
			if hex.EncodeToString(s.Signature) != v.SignatureHex || hex.EncodeToString(s.Payload) != v.PayloadHex {
				t.Errorf("Decode split payload/signature wrongly")
			}
			if len(v.Text) > assertion.MaxEd25519TextLen {
				t.Errorf("text of %d characters, more than %d", len(v.Text), assertion.MaxEd25519TextLen)
			}
		})
	}
	for _, v := range file.Invalid {
		t.Run("invalid/"+v.Name, func(t *testing.T) {
			if s, err := assertion.Decode(v.Text); !errors.Is(err, assertion.ErrMalformed) {
				t.Errorf("Decode(%q) = %+v, %v; want ErrMalformed", v.Text, s.Assertion, err)
			}
		})
	}
	for _, v := range file.Unsigned {
		t.Run("unencodable/"+v.Name, func(t *testing.T) {
			if _, err := v.Fields.assertion(t).MarshalBinary(); !errors.Is(err, assertion.ErrInvalid) {
				t.Errorf("MarshalBinary = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestMaximalVectorIs400Characters(t *testing.T) {
	if assertion.MaxEd25519TextLen != 400 {
		t.Errorf("MaxEd25519TextLen = %d, want 400", assertion.MaxEd25519TextLen)
	}
	defs := vectorDefs()
	last := defs[len(defs)-1]
	a := last.f.assertion(t)
	payload, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(payload) != assertion.MaxPayloadLen {
		t.Errorf("maximal payload is %d bytes, MaxPayloadLen %d", len(payload), assertion.MaxPayloadLen)
	}
}

func writeVectors(t *testing.T) {
	file := vectorFile{
		Comment: "Test vectors for siteboot discovery assertions, version 1. The layout is in " +
			"assertion/doc.go (Encoding). signed_message = ASCII \"siteboot/\" + purpose + 0x00 + payload; " +
			"signature = Ed25519(seed, signed_message); text = base64url without padding of payload || signature. " +
			"Every text under 'invalid' must fail to decode; every field set under 'unencodable' must fail to encode.",
		Purpose: assertion.Purpose,
	}
	for _, d := range vectorDefs() {
		seed := make([]byte, ed25519.SeedSize)
		for i := range seed {
			seed[i] = d.seed + byte(i)
		}
		key := ed25519.NewKeyFromSeed(seed)
		a := d.f.assertion(t)
		payload, err := a.MarshalBinary()
		if err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		msg := append([]byte("siteboot/"+assertion.Purpose+"\x00"), payload...)
		text := signText(t, key, assertion.Purpose, a)
		file.Vectors = append(file.Vectors, vector{
			Name: d.name, SeedHex: hex.EncodeToString(seed),
			PublicKeyHex: hex.EncodeToString(key.Public().(ed25519.PublicKey)),
			Fields:       d.f, PayloadHex: hex.EncodeToString(payload), MessageHex: hex.EncodeToString(msg),
			SignatureHex: hex.EncodeToString(ed25519.Sign(key, msg)), Text: text, TextLen: len(text),
		})
	}
	file.Invalid = invalidDefs(file.Vectors[0].Text)
	base := vectorDefs()[0].f
	with := func(name string, change func(*vectorFields)) {
		f := base
		change(&f)
		file.Unsigned = append(file.Unsigned, invalidField{name, f})
	}
	with("empty-site", func(f *vectorFields) { f.Site = "" })
	with("empty-agent", func(f *vectorFields) { f.Agent = "" })
	with("site-57-bytes", func(f *vectorFields) { f.Site = strings.Repeat("s", 57) })
	with("workflow-with-space", func(f *vectorFields) { f.Workflow = "wf 1" })
	with("agent-with-slash", func(f *vectorFields) { f.Agent = "node/1" })
	with("ip-with-zone", func(f *vectorFields) { f.IP = "fe80::1%eth0" })
	out, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vectorsFile, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// nextB64 returns the base64url character after c.
func nextB64(c byte) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, c)
	return string(alphabet[(i+1)%64])
}
