package tftpd

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// onlyReader hides every method of a file but those of fs.File: the sequential source.
type onlyReader struct{ fs.File }

// TestBlockSources: each way of reading a file (preadv of an open file, ReadAt, in
// sequence with and without the buffered reader) gives the same blocks, reading several at
// once and one at a time, for sizes around block boundaries; a file of whole blocks ends
// with an empty one.
func TestBlockSources(t *testing.T) {
	dir := t.TempDir()
	for _, blksize := range []int{512, 8192} {
		for _, size := range []int{0, 1, blksize - 1, blksize, blksize + 1, 3 * blksize, 7*blksize + 5} {
			data := bytes.Repeat([]byte("0123456789abcdefg"), size/17+1)[:size]
			name := fmt.Sprintf("f-%d-%d", blksize, size)
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			mapfs := fstest.MapFS{name: {Data: data}}
			opens := map[string]func() fs.File{
				"file": func() fs.File { f, _ := os.Open(filepath.Join(dir, name)); return f },
				"at":   func() fs.File { f, _ := mapfs.Open(name); return f },
				"seq":  func() fs.File { f, _ := mapfs.Open(name); return onlyReader{f} },
			}
			for kind, open := range opens {
				t.Run(fmt.Sprintf("%s/%d/%d", kind, blksize, size), func(t *testing.T) {
					f := open()
					defer f.Close()
					src := newBlockSource(f, blksize)
					defer src.release()
					if got := fmt.Sprintf("%T", src); got != map[string]string{"file": "*tftpd.vecSource", "at": "*tftpd.atSource", "seq": "*tftpd.streamSource"}[kind] {
						t.Fatalf("source %s for %s", got, kind)
					}
					var got [][]byte
					for k := 3; ; k = 4 - k { // 3 blocks, then 1, then 3 ...
						w := &window{bufs: make([]*[]byte, 4), classes: make([]int, 4), lens: make([]int, 4)}
						for i := range w.bufs {
							b := make([]byte, 4+blksize)
							w.bufs[i] = &b
						}
						x := &sender{src: src, w: w, blksize: blksize, next: uint16(len(got) + 1)}
						x.readBlocks(k)
						if x.readErr != nil {
							t.Fatal(x.readErr)
						}
						pkts, _ := w.datagrams(k)
						for _, d := range pkts {
							got = append(got, bytes.Clone(d[4:]))
						}
						if x.eof {
							break
						}
						if w.held != k {
							t.Fatalf("read %d of %d blocks before the end", w.held, k)
						}
					}
					var want [][]byte
					for off := 0; ; off += blksize {
						b := data[off:min(off+blksize, size)]
						want = append(want, b)
						if len(b) < blksize {
							break
						}
					}
					if len(got) != len(want) {
						t.Fatalf("%d blocks, want %d", len(got), len(want))
					}
					for i := range want {
						if !bytes.Equal(got[i], want[i]) {
							t.Fatalf("block %d: %d bytes, want %d identical", i+1, len(got[i]), len(want[i]))
						}
					}
				})
			}
		}
	}
}
