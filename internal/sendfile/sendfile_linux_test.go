package sendfile

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// writeFile writes n random bytes to a file of t's directory and returns them and the path.
func writeFile(t *testing.T, n int) ([]byte, string) {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	p := filepath.Join(t.TempDir(), "image")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b, p
}

// cachedPages asks cachestat(2) how many pages of the file are cached; ok is false where
// the kernel has no cachestat.
func cachedPages(t *testing.T, f *os.File) (n uint64, ok bool) {
	t.Helper()
	var st unix.Cachestat_t
	err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &st, 0)
	if errors.Is(err, unix.ENOSYS) {
		return 0, false
	}
	if err != nil {
		t.Fatalf("cachestat: %v", err)
	}
	return st.Cache, true
}

// serve starts an HTTP server on a loopback listener, wrapped by wrap, that serves path
// with http.ServeContent, as the image cache does.
func serve(t testing.TB, path string, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer f.Close()
		http.ServeContent(w, r, "", time.Time{}, f)
	})}
	go srv.Serve(wrap(ln))
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

func get(t *testing.T, url, rng string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A cached file goes out whole and in ranges, every call raw: the scheduler is not told.
func TestServeContentCachedIsRaw(t *testing.T) {
	want, p := writeFile(t, 2*maxChunk+12345) // three calls at least
	f, _ := os.Open(p)
	if _, ok := cachedPages(t, f); !ok {
		t.Skip("the kernel has no cachestat(2) (Linux 6.5): every call goes through the scheduler")
	}
	f.Close()
	url := serve(t, p, Listener)
	raw0, sched0 := rawCalls.Load(), schedCalls.Load()
	if got := get(t, url, ""); !bytes.Equal(got, want) {
		t.Fatalf("whole file: %d bytes, not the %d written", len(got), len(want))
	}
	if got := get(t, url, "bytes=4097-5000000"); !bytes.Equal(got, want[4097:5000001]) {
		t.Fatalf("range: %d bytes differ from the file's", len(got))
	}
	raw, sched := rawCalls.Load()-raw0, schedCalls.Load()-sched0
	if raw < 3 || sched != 0 {
		t.Fatalf("calls: %d raw, %d through the scheduler; want at least 3 raw and none through it", raw, sched)
	}
}

// A file whose pages are not cached is sent through the scheduler, so that its read from
// disk does not hold a P.
func TestUncachedGoesThroughScheduler(t *testing.T) {
	want, p := writeFile(t, 3<<20)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil { // written back, so that the pages can be dropped
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	n, ok := cachedPages(t, f)
	if !ok {
		t.Skip("the kernel has no cachestat(2) (Linux 6.5)")
	}
	if n == uint64(len(want))/uint64(os.Getpagesize()) {
		t.Skipf("the file system of %s keeps the file's pages cached (tmpfs?)", p)
	}
	url := serve(t, p, Listener)
	sched0 := schedCalls.Load()
	if got := get(t, url, ""); !bytes.Equal(got, want) {
		t.Fatalf("%d bytes, not the %d written", len(got), len(want))
	}
	if schedCalls.Load() == sched0 {
		t.Fatal("an uncached file was sent with raw calls only")
	}
}

// pair returns the server's side (a *conn) and the client's side of a loopback connection.
func pair(t *testing.T) (*conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Listener(ln).Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close(); cl.Close() })
	c, ok := sc.(*conn)
	if !ok {
		t.Fatalf("accepted a %T, not a *conn", sc)
	}
	return c, cl
}

// readN reads n bytes from c in the background.
func readN(c net.Conn, n int) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		b := make([]byte, n)
		k, _ := io.ReadFull(c, b)
		ch <- b[:k]
	}()
	return ch
}

func offset(t *testing.T, f *os.File) int64 {
	t.Helper()
	o, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// A limited reader sends its N bytes from the file's offset and leaves both moved past them,
// as net's ReadFrom does; a file alone is sent to its end.
func TestReadFromOffsets(t *testing.T) {
	want, p := writeFile(t, 1<<20)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, cl := pair(t)

	f.Seek(1000, io.SeekStart)
	got := readN(cl, 300000)
	lr := &io.LimitedReader{R: f, N: 300000}
	n, err := c.ReadFrom(lr)
	if err != nil || n != 300000 || lr.N != 0 {
		t.Fatalf("limited: %d sent, N left %d, %v; want 300000, 0, nil", n, lr.N, err)
	}
	if o := offset(t, f); o != 301000 {
		t.Fatalf("limited: the file's offset is %d, want 301000", o)
	}
	if b := <-got; !bytes.Equal(b, want[1000:301000]) {
		t.Fatal("limited: the bytes read differ from the file's")
	}

	got = readN(cl, len(want)-301000)
	n, err = c.ReadFrom(f)
	if err != nil || n != int64(len(want)-301000) {
		t.Fatalf("to the end: %d sent, %v; want %d", n, err, len(want)-301000)
	}
	if o := offset(t, f); o != int64(len(want)) {
		t.Fatalf("to the end: the file's offset is %d, want %d", o, len(want))
	}
	if b := <-got; !bytes.Equal(b, want[301000:]) {
		t.Fatal("to the end: the bytes read differ from the file's")
	}
	if n, err := c.ReadFrom(f); n != 0 || err != nil {
		t.Fatalf("at the end: %d sent, %v; want 0, nil", n, err)
	}
}

// A peer that stops reading ends the copy at the write deadline with a timeout, having
// sent part of the file; the offset counts what went.
func TestReadFromWriteDeadline(t *testing.T) {
	_, p := writeFile(t, 64<<20) // more than loopback's socket buffers hold
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, _ := pair(t) // the client never reads
	const wait = 300 * time.Millisecond
	c.SetWriteDeadline(time.Now().Add(wait))
	start := time.Now()
	n, err := c.ReadFrom(f)
	took := time.Since(start)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err %v: want a timeout", err)
	}
	if n <= 0 || n >= 64<<20 {
		t.Fatalf("%d bytes sent: want part of the file", n)
	}
	if o := offset(t, f); o != n {
		t.Fatalf("the file's offset is %d, want the %d sent", o, n)
	}
	// The deadline is what ends it: not before, and not long after (a loaded machine may
	// be slow to run the poller's timer, hence the margin).
	if took < wait || took > wait+10*time.Second {
		t.Fatalf("the copy took %v with a deadline %v away", took, wait)
	}
}

// What is not a file, and a file without an offset (a pipe), go through net's ReadFrom and
// arrive whole, with no sendfile(2) call of this package's.
func TestReadFromOthers(t *testing.T) {
	c, cl := pair(t)
	raw0, sched0 := rawCalls.Load(), schedCalls.Load()

	want := bytes.Repeat([]byte("not a file "), 10000)
	got := readN(cl, len(want))
	if n, err := c.ReadFrom(bytes.NewReader(want)); err != nil || n != int64(len(want)) {
		t.Fatalf("a bytes.Reader: %d sent, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatal("a bytes.Reader: the bytes read differ")
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	go func() { fmt.Fprint(pw, strings.Repeat("through a pipe ", 1000)); pw.Close() }()
	got = readN(cl, 15000)
	if n, err := c.ReadFrom(pr); err != nil || n != 15000 {
		t.Fatalf("a pipe: %d sent, %v; want 15000", n, err)
	}
	if b := <-got; string(b) != strings.Repeat("through a pipe ", 1000) {
		t.Fatal("a pipe: the bytes read differ")
	}
	if raw, sched := rawCalls.Load()-raw0, schedCalls.Load()-sched0; raw != 0 || sched != 0 {
		t.Fatalf("calls of sendfile: %d raw, %d through the scheduler; want none (a pipe has no offset to send from)", raw, sched)
	}
}
