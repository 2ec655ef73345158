package tftpd

import (
	"bufio"
	"io"
	"io/fs"
	"sync"
)

// blockSource reads a transfer's file into the datagrams of its blocks.
type blockSource interface {
	// read fills bufs in order with the file's next bytes and returns how many it read:
	// fewer than the buffers hold only at the end of the file.
	read(bufs [][]byte) (int, error)
	// release gives back what the source holds (not the file).
	release()
}

// newBlockSource picks how a transfer reads f: with one preadv(2) for all the blocks a
// window needs where f is an open file (Linux), at offsets where it is an io.ReaderAt (an
// fstest.MapFS, an embed.FS), else in sequence (through a pooled buffered reader when the
// blocks are small). The first two copy each byte once, from the file into its datagram,
// and hold no buffer of their own.
func newBlockSource(f fs.File, blksize int) blockSource {
	if s := newVecSource(f); s != nil {
		return s
	}
	if ra, ok := f.(io.ReaderAt); ok {
		return &atSource{r: ra}
	}
	if blksize < directRead {
		br := readers.Get().(*bufio.Reader)
		br.Reset(f)
		return &streamSource{r: br, br: br}
	}
	return &streamSource{r: f}
}

// maxMapped bounds the size of a file sent from a mapping: iPXE builds, shim and GRUB are
// a few MiB at most. A larger file (a kernel over TFTP) is read: its pages
// would all count in the process's resident size while mapped.
const maxMapped = 4 << 20

// noSource is the source of a transfer that reads nothing: its file lies in a mapping.
type noSource struct{}

func (noSource) read(bufs [][]byte) (int, error) { return 0, nil }
func (noSource) release()                        {}

// atSource reads at offsets.
type atSource struct {
	r   io.ReaderAt
	off int64
}

func (s *atSource) read(bufs [][]byte) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := s.r.ReadAt(b, s.off)
		s.off += int64(n)
		total += n
		if n < len(b) {
			if err == io.EOF || err == nil {
				return total, nil
			}
			return total, err
		}
	}
	return total, nil
}

func (s *atSource) release() {}

// streamSource reads in sequence.
type streamSource struct {
	r  io.Reader
	br *bufio.Reader // pooled; nil when r is the file itself
}

func (s *streamSource) read(bufs [][]byte) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := io.ReadFull(s.r, b)
		total += n
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (s *streamSource) release() {
	if s.br != nil {
		s.br.Reset(nil)
		readers.Put(s.br)
		s.br = nil
	}
}

// directRead is the block size from which a sequential source reads straight into the
// datagrams: a buffered reader would copy every block once more.
const directRead = 8192

// readers pools the buffered readers sequential sources of small blocks read through, so
// that they read the file in large pieces.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 128<<10) }}
