package ipxebin

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"math/rand/v2"
	"testing"
)

func embeddedKPXE(t testing.TB) []byte {
	t.Helper()
	bin, err := fs.ReadFile(Embedded(), UndionlyKPXE)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// The committed undionly.kpxe parses as zbin writes it: a prefix, then packed blocks that
// reach the end of the file, each with a CRC that matches and a stream that decompresses;
// the placeholder is in the last one, once.
func TestParseEmbeddedKPXE(t *testing.T) {
	bin := embeddedKPXE(t)
	blocks, err := parseZbin(bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) < 2 || blocks[len(blocks)-1].end != len(bin) {
		t.Fatalf("blocks %v, want several ending at %d", blocks, len(bin))
	}
	for i, b := range blocks {
		if b.off%zbinAlign != 0 {
			t.Errorf("block %d at %d, not %d-aligned", i, b.off, zbinAlign)
		}
		data, err := unpackBlock(b.stream(bin))
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		n := bytes.Count(data, PlaceholderFingerprint[:])
		if want := map[bool]int{true: 1, false: 0}[i == len(blocks)-1]; n != want {
			t.Errorf("block %d of %d (%d bytes unpacked) holds the placeholder %d times, want %d", i+1, len(blocks), len(data), n, want)
		}
	}
	if _, err := sizeField(bin[:blocks[0].off], len(bin)); err != nil {
		t.Errorf("image size field: %v", err)
	}
}

// Repacking changes the fingerprint in the last block and the image size in the prefix, and
// nothing else: the prefix's other bytes and the other blocks are the same, and the last
// block unpacks to the original's data with the CA's fingerprint in the placeholder's place.
func TestWithTrustZbin(t *testing.T) {
	bin := embeddedKPXE(t)
	orig := bytes.Clone(bin)
	fp := sha256.Sum256([]byte("a CA certificate"))
	out, err := withTrustZbin(bin, fp)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bin, orig) {
		t.Fatal("withTrustZbin modified its input")
	}
	before, _ := parseZbin(bin)
	after, err := parseZbin(out)
	if err != nil {
		t.Fatalf("the repacked image does not parse: %v", err)
	}
	if len(after) != len(before) {
		t.Fatalf("%d blocks after repacking, want %d", len(after), len(before))
	}
	last := before[len(before)-1]
	at, err := sizeField(bin[:before[0].off], len(bin))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := binary.LittleEndian.Uint16(out[at:]), uint16((len(out)+15)/16); got != want {
		t.Errorf("image size field %#x, want %#x for %d bytes", got, want, len(out))
	}
	if !bytes.Equal(out[:at], bin[:at]) || !bytes.Equal(out[at+2:last.off], bin[at+2:last.off]) {
		t.Error("bytes before the last block changed beside the image size")
	}
	want, err := unpackBlock(last.stream(bin))
	if err != nil {
		t.Fatal(err)
	}
	copy(want[bytes.Index(want, PlaceholderFingerprint[:]):], fp[:])
	got, err := unpackBlock(after[len(after)-1].stream(out))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the last block unpacks to %d bytes other than the original's with the fingerprint replaced (%d)", len(got), len(want))
	}
	t.Logf("undionly.kpxe: %d bytes, %d repacked (last block's stream %d -> %d)", len(bin), len(out),
		len(last.stream(bin)), len(after[len(after)-1].stream(out)))

	again, err := withTrustZbin(bin, fp)
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("a second repacking differs (%v): the image served must not depend on the call", err)
	}
	other, err := withTrustZbin(bin, sha256.Sum256([]byte("another CA")))
	if err != nil || bytes.Equal(other, out) {
		t.Errorf("two fingerprints give the same image (%v)", err)
	}
}

// The branch filter and its inverse undo each other, on the BIOS build's code and on noise
// dense in E8 and E9 bytes.
func TestBCJRoundTrip(t *testing.T) {
	bin := embeddedKPXE(t)
	blocks, err := parseZbin(bin)
	if err != nil {
		t.Fatal(err)
	}
	code, err := unpackBlock(blocks[len(blocks)-1].stream(bin))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 4096)
	for i := range noise {
		noise[i] = byte(r.UintN(256))
		if r.UintN(4) == 0 {
			noise[i] = 0xe8 | byte(r.UintN(2))
		}
	}
	for name, data := range map[string][]byte{"code": code, "noise": noise, "short": {0xe8, 1, 2}, "empty": nil} {
		f := bytes.Clone(data)
		bcj(f)
		if name == "code" && bytes.Equal(f, data) {
			t.Errorf("%s: the filter changed nothing", name)
		}
		unBCJ(f)
		if !bytes.Equal(f, data) {
			t.Errorf("%s: unBCJ(bcj(x)) != x", name)
		}
		unBCJ(f)
		bcj(f)
		if !bytes.Equal(f, data) {
			t.Errorf("%s: bcj(unBCJ(x)) != x", name)
		}
	}
}

// Damaged or unknown images are refused, never repacked into something that would not run.
func TestWithTrustZbinRefuses(t *testing.T) {
	bin := embeddedKPXE(t)
	blocks, _ := parseZbin(bin)
	fp := sha256.Sum256([]byte("ca"))
	last := blocks[len(blocks)-1]

	badCRC := bytes.Clone(bin)
	badCRC[last.end-1] ^= 1
	noSize := bytes.Clone(bin)
	at, _ := sizeField(bin[:blocks[0].off], len(bin))
	noSize[at]++
	truncated := bin[:len(bin)-1]
	for name, tc := range map[string]struct {
		bin  []byte
		want error
	}{
		"last block's CRC damaged": {badCRC, ErrNoTrustArea},
		"image size not found":     {noSize, ErrImageLayout},
		"truncated":                {truncated, ErrNoTrustArea},
		"not an image":             {[]byte("#!ipxe\nexit\n"), ErrNoTrustArea},
	} {
		if _, err := withTrustZbin(tc.bin, fp); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// Images are repacked once per image and CA: the cache hands the same bytes back.
func TestWithTrustZbinCached(t *testing.T) {
	bin := embeddedKPXE(t)
	fp := sha256.Sum256([]byte("cached CA"))
	a, err := withTrustZbinCached(bin, fp)
	if err != nil {
		t.Fatal(err)
	}
	b, err := withTrustZbinCached(bin, fp)
	if err != nil || &a[0] != &b[0] {
		t.Errorf("the second call repacked again (%v)", err)
	}
}

// syntheticZbin is a small image as zbin lays one out: a 16-byte prefix holding the image
// size in paragraphs, and one packed block of code-like bytes with the placeholder inside.
func syntheticZbin(t testing.TB) []byte {
	t.Helper()
	data := bytes.Repeat([]byte{0x55, 0xe8, 0x10, 0, 0, 0, 0xc3, 0x90}, 64)
	data = append(append(data, PlaceholderFingerprint[:]...), 0xe9, 0xf0, 0xff, 0xff, 0xff, 0xc3)
	block, err := packBlock(data)
	if err != nil {
		t.Fatal(err)
	}
	prefix := []byte("\xfa\xfcPGH?siteboot..")
	binary.LittleEndian.PutUint16(prefix[2:], uint16((len(prefix)+len(block)+15)/16))
	return append(prefix, block...)
}

// A synthetic image repacks like the BIOS build: the placeholder found through the branch
// filter, the fingerprint in its place, the size field following the new length.
func TestWithTrustZbinSynthetic(t *testing.T) {
	bin := syntheticZbin(t)
	fp := sha256.Sum256([]byte("synthetic CA"))
	out, err := withTrustZbin(bin, fp)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseZbin(out)
	if err != nil || len(blocks) != 1 || blocks[0].off != 16 {
		t.Fatalf("repacked image: blocks %v, %v; want one at 16", blocks, err)
	}
	data, err := unpackBlock(blocks[0].stream(out))
	if err != nil || !bytes.Contains(data, fp[:]) || bytes.Contains(data, PlaceholderFingerprint[:]) {
		t.Fatalf("repacked block: %v; want the fingerprint in the placeholder's place", err)
	}
	if got, want := binary.LittleEndian.Uint16(out[2:]), uint16((len(out)+15)/16); got != want {
		t.Errorf("size field %#x, want %#x", got, want)
	}
}

// FuzzWithTrustZbin: any input either is refused with one of the package's errors or gives
// an image that parses, with the fingerprint in its last block.
func FuzzWithTrustZbin(f *testing.F) {
	bin := embeddedKPXE(f)
	blocks, _ := parseZbin(bin)
	f.Add(bin[blocks[0].off:]) // no prefix, so no size field
	f.Add(bin[:blocks[1].off])
	f.Add([]byte{9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(syntheticZbin(f))
	fp := sha256.Sum256([]byte("fuzz CA"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := withTrustZbin(in, fp)
		if err != nil {
			if !errors.Is(err, ErrNoTrustArea) && !errors.Is(err, ErrManyTrustAreas) && !errors.Is(err, ErrImageLayout) {
				t.Fatalf("error %v wraps none of the package's errors", err)
			}
			return
		}
		bs, err := parseZbin(out)
		if err != nil {
			t.Fatalf("output does not parse: %v", err)
		}
		data, err := unpackBlock(bs[len(bs)-1].stream(out))
		if err != nil || !bytes.Contains(data, fp[:]) {
			t.Fatalf("output's last block lacks the fingerprint (%v)", err)
		}
	})
}
