package ipxebin

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/ulikunitz/xz/lzma"
)

// An iPXE BIOS image (undionly.kpxe) as iPXE's zbin writes it: an uncompressed prefix (the
// PXE loader and the decompressor), then packed blocks, each aligned to 16 bytes (the
// prefix's install_block rounds up to the next block) and padded with 0xff:
//
//	len32   uint32 LE, the length of the LZMA stream plus 4
//	stream  raw LZMA1 (lc=2, lp=0, pb=0, end-of-payload marker) of the block after zbin's
//	        x86 branch filter (BCJ)
//	crc32   uint32 LE, CRC-32 of the stream with seed 0xffffffff and no final inversion
//
// The last block is .text and .data, whose read-only data holds the trusted root's
// fingerprint. The prefix holds one field that depends on the image's length: the PXE
// loader's image size in 16-byte paragraphs (zbin's ADDW fixup on image_size_pgh), used to
// place its stack above the image.

const (
	zbinAlign = 16
	// zbinMaxPad is the most padding between two blocks (zbinAlign - 1).
	zbinMaxPad = zbinAlign - 1
	// lzmaLC, lzmaLP and lzmaPB are the literal context, literal position and position
	// bits zbin compresses with and iPXE's decompressor (unlzma.S) assumes.
	lzmaLC, lzmaLP, lzmaPB = 2, 0, 0
	// maxBlock bounds a block's decompressed size: an image loaded below 640 KiB, whose
	// .text and .data decompress to well under 1 MiB.
	maxBlock = 4 << 20
)

// ErrImageLayout: a compressed BIOS image whose layout repacking does not handle (the
// placeholder outside its last block, no single image-size field in its prefix, a block
// that does not decompress).
var ErrImageLayout = errors.New("ipxebin: compressed image has a layout repacking does not handle")

// zblock is one packed block: off is where its length field starts, end where its CRC ends.
type zblock struct{ off, end int }

// stream returns the block's LZMA stream within bin.
func (b zblock) stream(bin []byte) []byte { return bin[b.off+4 : b.end-4] }

// ipxeCRC32 is the CRC zbin writes: the IEEE polynomial, reflected, seed 0xffffffff, no
// final inversion.
func ipxeCRC32(p []byte) uint32 { return ^crc32.ChecksumIEEE(p) }

// blockAt returns the packed block starting at off in bin, if one does: a length that fits
// and a CRC that matches.
func blockAt(bin []byte, off int) (zblock, bool) {
	if off < 0 || off+8 > len(bin) {
		return zblock{}, false
	}
	n := int64(binary.LittleEndian.Uint32(bin[off:]))
	// An LZMA stream is at least 5 bytes (the range coder's flush).
	if n < 5+4 || int64(off)+4+n > int64(len(bin)) {
		return zblock{}, false
	}
	end := off + 4 + int(n)
	if ipxeCRC32(bin[off+4:end-4]) != binary.LittleEndian.Uint32(bin[end-4:]) {
		return zblock{}, false
	}
	return zblock{off: off, end: end}, true
}

// chainFrom returns the blocks from off to the end of bin, each after the previous one's
// padding, or nil when they do not reach the end exactly.
func chainFrom(bin []byte, off int) []zblock {
	var blocks []zblock
	for off < len(bin) {
		b, ok := blockAt(bin, off)
		if !ok {
			return nil
		}
		blocks = append(blocks, b)
		if b.end == len(bin) {
			return blocks
		}
		next := -1
		for p := b.end; p <= b.end+zbinMaxPad && p < len(bin); p++ {
			if p > b.end && bin[p-1] != 0xff {
				break
			}
			if _, ok := blockAt(bin, p); ok {
				next = p
				break
			}
		}
		if next < 0 {
			return nil
		}
		off = next
	}
	return nil
}

// parseZbin finds the packed blocks of a zbin image: the first offset from which a chain of
// blocks reaches the end of bin. The prefix is bin[:blocks[0].off].
func parseZbin(bin []byte) ([]zblock, error) {
	for off := 0; off+8 <= len(bin); off++ {
		if _, ok := blockAt(bin, off); !ok {
			continue
		}
		if blocks := chainFrom(bin, off); blocks != nil {
			return blocks, nil
		}
	}
	return nil, ErrNoTrustArea
}

// lzmaHeader is a classic .lzma header for a raw zbin stream: its properties, a dictionary
// as large as any block, and an unknown size (the stream ends with its marker).
func lzmaHeader() []byte {
	h := make([]byte, 13)
	h[0] = (lzmaPB*5+lzmaLP)*9 + lzmaLC
	binary.LittleEndian.PutUint32(h[1:], maxBlock)
	for i := 5; i < len(h); i++ {
		h[i] = 0xff
	}
	return h
}

// unpackBlock decompresses a block's stream and undoes the branch filter.
func unpackBlock(stream []byte) ([]byte, error) {
	r, err := lzma.ReaderConfig{DictCap: maxBlock}.NewReader(io.MultiReader(bytes.NewReader(lzmaHeader()), bytes.NewReader(stream)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrImageLayout, err)
	}
	out, err := io.ReadAll(io.LimitReader(r, maxBlock+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrImageLayout, err)
	}
	if len(out) > maxBlock {
		return nil, fmt.Errorf("%w: a block decompresses to more than %d bytes", ErrImageLayout, maxBlock)
	}
	unBCJ(out)
	return out, nil
}

// packBlock applies the branch filter to a copy of data and compresses it as zbin does,
// returning the whole block: length, stream, CRC.
func packBlock(data []byte) ([]byte, error) {
	filtered := bytes.Clone(data)
	bcj(filtered)
	var buf bytes.Buffer
	w, err := lzma.WriterConfig{
		Properties: &lzma.Properties{LC: lzmaLC, LP: lzmaLP, PB: lzmaPB},
		DictCap:    maxBlock,
		Matcher:    lzma.HashTable4,
		EOSMarker:  true,
	}.NewWriter(&buf)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(filtered); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	stream := buf.Bytes()[len(lzmaHeader()):]
	block := make([]byte, 4, 4+len(stream)+4)
	binary.LittleEndian.PutUint32(block, uint32(len(stream)+4))
	block = append(block, stream...)
	return binary.LittleEndian.AppendUint32(block, ipxeCRC32(stream)), nil
}

// bcj is zbin's x86 branch filter: the rel32 target after each E8 (call) or E9 (jmp) byte
// within the data becomes absolute, so that calls to one function compress alike.
func bcj(data []byte) {
	limit := len(data) - 5
	for off := 0; off <= limit; off++ {
		if data[off]&0xfe != 0xe8 {
			continue
		}
		t := int64(int32(binary.LittleEndian.Uint32(data[off+1:])))
		o, l := int64(off), int64(limit)
		switch {
		case t >= -o && t < l-o:
			t += o
		case t >= l-o && t < l:
			t -= l
		}
		binary.LittleEndian.PutUint32(data[off+1:], uint32(int32(t)))
		off += 4
	}
}

// unBCJ undoes [bcj], as iPXE's decompressor does after unpacking a block.
func unBCJ(data []byte) {
	limit := len(data) - 5
	for off := 0; off <= limit; off++ {
		if data[off]&0xfe != 0xe8 {
			continue
		}
		t := binary.LittleEndian.Uint32(data[off+1:])
		o, l := uint32(off), uint32(limit)
		switch {
		case t < l:
			t -= o
		case ^t < o:
			t += l
		}
		binary.LittleEndian.PutUint32(data[off+1:], t)
		off += 4
	}
}

// sizeField returns the offset within prefix of the image's size in paragraphs (a uint16
// LE equal to size rounded up to 16 bytes, divided by 16), when exactly one is there.
func sizeField(prefix []byte, size int) (int, error) {
	pgh := (size + zbinAlign - 1) / zbinAlign
	if pgh > 0xffff {
		return 0, fmt.Errorf("%w: %d bytes do not fit a 16-bit paragraph count", ErrImageLayout, size)
	}
	w := binary.LittleEndian.AppendUint16(nil, uint16(pgh))
	if n := bytes.Count(prefix, w); n != 1 {
		return 0, fmt.Errorf("%w: the image size %#x occurs %d times in the prefix, want once", ErrImageLayout, pgh, n)
	}
	return bytes.Index(prefix, w), nil
}

// withTrustZbin is [WithTrust] for a compressed BIOS image: it unpacks the block holding the
// placeholder (the last one), replaces the fingerprint, packs it again and fixes the
// block's length and CRC and the prefix's image size. The blocks before it are untouched.
func withTrustZbin(bin []byte, fp [sha256.Size]byte) ([]byte, error) {
	blocks, err := parseZbin(bin)
	if err != nil {
		return nil, err
	}
	ph := PlaceholderFingerprint[:]
	var last []byte
	for i, b := range blocks {
		data, err := unpackBlock(b.stream(bin))
		if err != nil {
			return nil, err
		}
		n := bytes.Count(data, ph)
		switch {
		case n > 1:
			return nil, ErrManyTrustAreas
		case n == 1 && i != len(blocks)-1:
			return nil, fmt.Errorf("%w: the placeholder is in block %d of %d, not the last", ErrImageLayout, i+1, len(blocks))
		case n == 1:
			last = data
		}
	}
	if last == nil {
		return nil, ErrNoTrustArea
	}
	prefix := bin[:blocks[0].off]
	at, err := sizeField(prefix, len(bin))
	if err != nil {
		return nil, err
	}
	copy(last[bytes.Index(last, ph):], fp[:])
	block, err := packBlock(last)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrImageLayout, err)
	}
	lastBlock := blocks[len(blocks)-1]
	out := append(bytes.Clone(bin[:lastBlock.off]), block...)
	pgh := (len(out) + zbinAlign - 1) / zbinAlign
	if pgh > 0xffff {
		return nil, fmt.Errorf("%w: %d bytes do not fit a 16-bit paragraph count", ErrImageLayout, len(out))
	}
	binary.LittleEndian.PutUint16(out[at:], uint16(pgh))
	return out, nil
}

// zbinCache keeps the last few repacked images: repacking takes a tenth of a second, and
// every machine that boots asks for the same image trusting the same CA.
var zbinCache struct {
	sync.Mutex
	m map[[2 * sha256.Size]byte][]byte
}

const zbinCacheMax = 8

// withTrustZbinCached is withTrustZbin through zbinCache. The image returned is shared:
// callers must not modify it.
func withTrustZbinCached(bin []byte, fp [sha256.Size]byte) ([]byte, error) {
	var key [2 * sha256.Size]byte
	sum := sha256.Sum256(bin)
	copy(key[:], sum[:])
	copy(key[sha256.Size:], fp[:])
	zbinCache.Lock()
	out, ok := zbinCache.m[key]
	zbinCache.Unlock()
	if ok {
		return out, nil
	}
	out, err := withTrustZbin(bin, fp)
	if err != nil {
		return nil, err
	}
	zbinCache.Lock()
	defer zbinCache.Unlock()
	if zbinCache.m == nil || len(zbinCache.m) >= zbinCacheMax {
		zbinCache.m = make(map[[2 * sha256.Size]byte][]byte)
	}
	zbinCache.m[key] = out
	return out, nil
}
