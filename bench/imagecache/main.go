// Command imagecache-bench compares the image cache with nginx serving the same file over
// loopback, to 1 and to 8 concurrent clients, and the cache's pull-and-verify and startup
// verification with curl | sha256sum and sha256sum.
//
//	go run ./bench/imagecache -size 1073741824 -runs 3
//
// With -startup it measures instead how soon a restarted cache serves: the time from Open
// to the first image (the kernel) served over HTTP, for a cache of -cache-bytes found
// without verification stamps (hashed again in the background, kernel and initrd first)
// and with them, beside the time until every image was hashed again, which is what Open
// took before it served anything when it hashed the whole cache first.
//
//	go run ./bench/imagecache -startup -cache-bytes 10737418240 -runs 2
//
// nginx runs with its own temporary configuration and -p prefix on a free loopback port and
// is stopped by its PID. Runs are interleaved (cache, nginx, cache, nginx, ...) and medians
// are reported, because the machine is shared.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
)

func main() {
	size := flag.Int64("size", 1<<30, "image size in bytes")
	runs := flag.Int("runs", 3, "interleaved runs per figure")
	clientsFlag := flag.String("clients", "1,8", "concurrent client counts")
	tmp := flag.String("dir", os.TempDir(), "where to put the image and nginx's prefix")
	startupMode := flag.Bool("startup", false, "measure Open to first image served instead")
	cacheBytes := flag.Int64("cache-bytes", 10<<30, "with -startup: the cache's size")
	flag.Parse()
	var err error
	if *startupMode {
		err = startup(*tmp, *cacheBytes, *runs)
	} else {
		err = run(*size, *runs, *clientsFlag, *tmp)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func run(size int64, runs int, clientsFlag, tmp string) error {
	nginxPath, err := exec.LookPath("nginx")
	if err != nil {
		return fmt.Errorf("nginx not found (Debian package nginx): %w", err)
	}
	work, err := os.MkdirTemp(tmp, "imagecache-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	cacheDir := filepath.Join(work, "cache")
	os.Mkdir(cacheDir, 0o755)

	// The image: pseudo-random bytes, hashed while written.
	start := time.Now()
	d, err := writeImage(filepath.Join(work, "image.tmp"), size)
	if err != nil {
		return err
	}
	imgPath := filepath.Join(cacheDir, d.String())
	if err := os.Rename(filepath.Join(work, "image.tmp"), imgPath); err != nil {
		return err
	}
	fmt.Printf("image %s, %d bytes, written in %v\n\n", d, size, time.Since(start).Round(time.Millisecond))

	// Hashing: Open (ignoring stamps) re-verifies the file in the background, timed until it
	// is done; sha256sum reads the same file. Interleaved, warm cache.
	var openMBs, sumMBs, sslMBs []float64
	for range runs {
		t0 := time.Now()
		c, err := imagecache.Open(context.Background(), imagecache.Config{Dir: cacheDir, IgnoreStamps: true})
		if err != nil {
			return err
		}
		if err := c.WaitVerified(context.Background()); err != nil {
			return err
		}
		openMBs = append(openMBs, mbps(size, time.Since(t0)))
		if len(c.Inventory()) != 1 {
			return errors.New("the cache did not verify the image")
		}
		c.Close()
		t0 = time.Now()
		out, err := exec.Command("sha256sum", imgPath).Output()
		if err != nil {
			return err
		}
		sumMBs = append(sumMBs, mbps(size, time.Since(t0)))
		if !strings.HasPrefix(string(out), d.String()) {
			return errors.New("sha256sum disagrees")
		}
		t0 = time.Now()
		out, err = exec.Command("openssl", "dgst", "-sha256", "-r", imgPath).Output()
		if err != nil {
			return err
		}
		sslMBs = append(sslMBs, mbps(size, time.Since(t0)))
		if !strings.HasPrefix(string(out), d.String()) {
			return errors.New("openssl disagrees")
		}
	}

	// The cache's server.
	cache, err := imagecache.Open(context.Background(), imagecache.Config{
		Dir:   cacheDir,
		Fence: alwaysActive{},
	})
	if err != nil {
		return err
	}
	defer cache.Close()
	grant, err := cache.BootGrant(time.Time{})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/cache/", cache)
	srv := &http.Server{Handler: mux, MaxHeaderBytes: 8 << 10}
	go srv.Serve(ln)
	defer srv.Close()
	cacheURL := "http://" + ln.Addr().String() + grant.Path(d)

	// nginx on the same file.
	nginxURL, stop, err := startNginx(nginxPath, work, cacheDir)
	if err != nil {
		return err
	}
	defer stop()
	nginxURL += "/" + d.String()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	var counts []int
	for _, s := range strings.Split(clientsFlag, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			return err
		}
		counts = append(counts, n)
	}
	fmt.Printf("%-10s %8s %14s %14s %7s\n", "serving", "clients", "imagecache MB/s", "nginx MB/s", "ratio")
	for _, n := range counts {
		var ours, theirs []float64
		for range runs {
			a, err := download(client, cacheURL, n, size)
			if err != nil {
				return fmt.Errorf("imagecache: %w", err)
			}
			b, err := download(client, nginxURL, n, size)
			if err != nil {
				return fmt.Errorf("nginx: %w", err)
			}
			ours, theirs = append(ours, a), append(theirs, b)
		}
		fmt.Printf("%-10s %8d %14.0f %14.0f %6.2fx\n", "GET", n, median(ours), median(theirs), median(ours)/median(theirs))
		fmt.Printf("           runs: imagecache %v nginx %v\n", round(ours), round(theirs))
	}

	// 1,000 range reads of 64 KiB at random offsets, as iPXE's sanboot reads an ISO, one
	// client, the same offsets for both servers.
	fmt.Printf("\n%-28s %16s %16s %7s\n", "1,000 ranges of 64 KiB", "imagecache µs/op", "nginx µs/op", "time ratio")
	var ourRange, theirRange []float64
	for r := range runs {
		offsets := rangeOffsets(size, 1000, int64(r))
		a, err := rangeReads(client, cacheURL, offsets)
		if err != nil {
			return fmt.Errorf("imagecache ranges: %w", err)
		}
		b, err := rangeReads(client, nginxURL, offsets)
		if err != nil {
			return fmt.Errorf("nginx ranges: %w", err)
		}
		ourRange, theirRange = append(ourRange, a), append(theirRange, b)
	}
	fmt.Printf("%-28s %16.1f %16.1f %6.2fx\n", "GET Range", median(ourRange), median(theirRange), median(ourRange)/median(theirRange))
	fmt.Printf("           runs: imagecache %v nginx %v\n", round(ourRange), round(theirRange))

	// Pull and verify from nginx into a fresh cache, against curl | sha256sum.
	pullDir := filepath.Join(work, "pull")
	var pullMBs, curlMBs, curlDiskMBs []float64
	for range runs {
		os.RemoveAll(pullDir)
		c, err := imagecache.Open(context.Background(), imagecache.Config{
			Dir: pullDir, StallTimeout: time.Minute,
			AllowedSourceNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, // nginx on loopback
		})
		if err != nil {
			return err
		}
		t0 := time.Now()
		err = c.Pull(context.Background(), imagecache.Image{URL: nginxURL, SHA256: d})
		el := time.Since(t0)
		c.Close()
		if err != nil {
			return err
		}
		pullMBs = append(pullMBs, mbps(size, el))
		t0 = time.Now()
		out, err := exec.Command("sh", "-c", "curl -sf "+nginxURL+" | sha256sum").Output()
		if err != nil {
			return err
		}
		curlMBs = append(curlMBs, mbps(size, time.Since(t0)))
		if !bytes.HasPrefix(out, []byte(d.String())) {
			return errors.New("curl | sha256sum disagrees")
		}
		f := filepath.Join(work, "curl.img")
		t0 = time.Now()
		out, err = exec.Command("sh", "-c", "curl -sf -o "+f+" "+nginxURL+" && sync "+f+" && sha256sum "+f).Output()
		if err != nil {
			return err
		}
		curlDiskMBs = append(curlDiskMBs, mbps(size, time.Since(t0)))
		os.Remove(f)
		if !bytes.HasPrefix(out, []byte(d.String())) {
			return errors.New("curl -o; sha256sum disagrees")
		}
	}
	fmt.Println()
	fmt.Printf("%-44s %10s\n", "hashing", "MB/s")
	fmt.Printf("%-44s %10.0f  runs %v\n", "Open (re-verify the cached file)", median(openMBs), round(openMBs))
	fmt.Printf("%-44s %10.0f  runs %v\n", "sha256sum FILE", median(sumMBs), round(sumMBs))
	fmt.Printf("%-44s %9.2fx\n", "ratio to sha256sum", median(openMBs)/median(sumMBs))
	fmt.Printf("%-44s %10.0f  runs %v\n", "openssl dgst -sha256 FILE", median(sslMBs), round(sslMBs))
	fmt.Printf("%-44s %9.2fx\n", "ratio to openssl", median(openMBs)/median(sslMBs))
	fmt.Printf("%-44s %10.0f  runs %v\n", "Pull from nginx (hash, write, fsync, rename)", median(pullMBs), round(pullMBs))
	fmt.Printf("%-44s %10.0f  runs %v\n", "curl URL | sha256sum (no write)", median(curlMBs), round(curlMBs))
	fmt.Printf("%-44s %9.2fx\n", "ratio", median(pullMBs)/median(curlMBs))
	fmt.Printf("%-44s %10.0f  runs %v\n", "curl -o F; sync F; sha256sum F", median(curlDiskMBs), round(curlDiskMBs))
	fmt.Printf("%-44s %9.2fx\n", "ratio", median(pullMBs)/median(curlDiskMBs))
	return nil
}

// startup builds a cache of about cacheBytes: a 16 MiB kernel and a 64 MiB initrd of random
// bytes, and sparse files of 1 GiB for the rest, zeros but for a tail of their own (reading
// them costs no disk, hashing them costs what hashing any 1 GiB costs, which is what a
// restart pays). It then times, per run, Open to the kernel served over HTTP without
// stamps and until all is hashed again, and Open to the kernel served with the stamps the
// first run wrote.
func startup(tmp string, cacheBytes int64, runs int) error {
	work, err := os.MkdirTemp(tmp, "imagecache-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	kernel, err := writeImage(filepath.Join(work, "k.tmp"), 16<<20)
	if err != nil {
		return err
	}
	initrd, err := writeImage(filepath.Join(work, "i.tmp"), 64<<20)
	if err != nil {
		return err
	}
	os.Rename(filepath.Join(work, "k.tmp"), filepath.Join(work, kernel.String()))
	os.Rename(filepath.Join(work, "i.tmp"), filepath.Join(work, initrd.String()))
	const gib = 1 << 30
	n := max((cacheBytes-80<<20+gib-1)/gib, 0)
	h := sha256.New()
	zeros := make([]byte, 1<<20)
	for left := int64(gib - 8); left > 0; left -= int64(len(zeros)) {
		h.Write(zeros[:min(left, int64(len(zeros)))])
	}
	state, err := h.(interface{ MarshalBinary() ([]byte, error) }).MarshalBinary()
	if err != nil {
		return err
	}
	for i := range n {
		tail := []byte(fmt.Sprintf("tail%04d", i))
		hi := sha256.New()
		if err := hi.(interface{ UnmarshalBinary([]byte) error }).UnmarshalBinary(state); err != nil {
			return err
		}
		hi.Write(tail)
		var d imagecache.Digest
		hi.Sum(d[:0])
		f, err := os.Create(filepath.Join(work, d.String()))
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(tail, gib-8); err != nil {
			return err
		}
		f.Close()
	}
	total := n*gib + 80<<20
	fmt.Printf("cache of %d images, %.2f GiB (%d sparse files of 1 GiB, a 16 MiB kernel, a 64 MiB initrd)\n\n", n+2, float64(total)/gib, n)

	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	serveFirst := func(stamps bool) (first, all time.Duration, served int, err error) {
		t0 := time.Now()
		c, err := imagecache.Open(context.Background(), imagecache.Config{
			Dir:          work,
			Fence:        alwaysActive{},
			BootImages:   []imagecache.Digest{kernel, initrd},
			IgnoreStamps: !stamps,
		})
		if err != nil {
			return 0, 0, 0, err
		}
		defer c.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, 0, err
		}
		srv := &http.Server{Handler: c}
		go srv.Serve(ln)
		defer srv.Close()
		g, err := c.BootGrant(time.Time{})
		if err != nil {
			return 0, 0, 0, err
		}
		url := "http://" + ln.Addr().String() + g.Path(kernel)
		for {
			resp, err := client.Get(url)
			if err != nil {
				return 0, 0, 0, err
			}
			got, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && got == 16<<20 {
				break
			}
			if time.Since(t0) > 10*time.Minute {
				return 0, 0, 0, errors.New("the kernel was never served")
			}
			time.Sleep(time.Millisecond)
		}
		first = time.Since(t0)
		served = len(c.Inventory())
		if err := c.WaitVerified(context.Background()); err != nil {
			return 0, 0, 0, err
		}
		all = time.Since(t0)
		if len(c.Inventory()) != int(n+2) {
			return 0, 0, 0, fmt.Errorf("%d images verified, want %d", len(c.Inventory()), n+2)
		}
		return first, all, served, nil
	}
	var firstNo, allNo, firstStamp []float64
	for r := range runs {
		f1, a1, _, err := serveFirst(false)
		if err != nil {
			return err
		}
		f2, _, served, err := serveFirst(true)
		if err != nil {
			return err
		}
		if served != int(n+2) {
			return fmt.Errorf("with stamps %d images were served at once, want %d", served, n+2)
		}
		fmt.Printf("run %d: no stamps: kernel served after %v, all hashed after %v; stamps: kernel served after %v\n",
			r+1, f1.Round(time.Microsecond), a1.Round(time.Millisecond), f2.Round(time.Microsecond))
		firstNo = append(firstNo, f1.Seconds()*1000)
		allNo = append(allNo, a1.Seconds()*1000)
		firstStamp = append(firstStamp, f2.Seconds()*1000)
	}
	fmt.Printf("\n%-58s %12s\n", "median of runs", "ms")
	fmt.Printf("%-58s %12.1f\n", "Open to kernel served, no stamps (kernel, initrd first)", median(firstNo))
	fmt.Printf("%-58s %12.1f\n", "Open to kernel served, stamps", median(firstStamp))
	fmt.Printf("%-58s %12.1f  (%.0f MB/s)\n", "Open to all hashed again (what Open blocked for before)", median(allNo), float64(total)/1e6/(median(allNo)/1000))
	return nil
}

func writeImage(path string, size int64) (imagecache.Digest, error) {
	f, err := os.Create(path)
	if err != nil {
		return imagecache.Digest{}, err
	}
	defer f.Close()
	r := rand.NewChaCha8([32]byte{1})
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		r.Read(buf[:n])
		f.Write(buf[:n])
		h.Write(buf[:n])
		left -= n
	}
	var d imagecache.Digest
	h.Sum(d[:0])
	return d, f.Close()
}

// download runs n concurrent GETs of url and returns the aggregate MB/s.
func download(client *http.Client, url string, n int, size int64) (float64, error) {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	t0 := time.Now()
	for range n {
		wg.Go(func() {
			resp, err := client.Get(url)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				errs <- fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			buf := make([]byte, 256<<10)
			got, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf)
			if err == nil && got != size {
				err = fmt.Errorf("%d bytes, want %d", got, size)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	el := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return mbps(int64(n)*size, el), nil
}

func startNginx(path, work, root string) (string, func(), error) {
	prefix := filepath.Join(work, "nginx")
	os.MkdirAll(filepath.Join(prefix, "tmp"), 0o700)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	conf := fmt.Sprintf(`daemon off;
user root;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	client_body_temp_path %[1]s/tmp/body;
	proxy_temp_path %[1]s/tmp/proxy;
	fastcgi_temp_path %[1]s/tmp/fastcgi;
	uwsgi_temp_path %[1]s/tmp/uwsgi;
	scgi_temp_path %[1]s/tmp/scgi;
	types { application/octet-stream bin; }
	default_type application/octet-stream;
	server {
		listen %[2]s;
		root %[3]s;
		location / { }
	}
}
`, prefix, addr, root)
	confPath := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(path, "-p", prefix, "-c", confPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		cmd.Process.Signal(syscall.SIGQUIT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr, stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, errors.New("nginx did not start listening")
}

// rangeChunk is one range read, the size iPXE's sanboot asks for.
const rangeChunk = 64 << 10

// rangeOffsets returns n chunk-aligned offsets in an image of size bytes, the same for a seed.
func rangeOffsets(size int64, n int, seed int64) []int64 {
	chunks := size / rangeChunk
	offs := make([]int64, n)
	x := uint64(seed)*0x9e3779b97f4a7c15 + 1
	for i := range offs {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		offs[i] = int64(x%uint64(chunks)) * rangeChunk
	}
	return offs
}

// rangeReads GETs each 64 KiB range in turn and returns the mean µs per read; every answer
// must be a 206 of exactly the range.
func rangeReads(client *http.Client, url string, offsets []int64) (float64, error) {
	t0 := time.Now()
	for _, off := range offsets {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+rangeChunk-1))
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusPartialContent || n != rangeChunk {
			return 0, fmt.Errorf("range at %d: %s, %d bytes", off, resp.Status, n)
		}
	}
	return float64(time.Since(t0).Microseconds()) / float64(len(offsets)), nil
}

func mbps(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func round(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x + 0.5)
	}
	return out
}

// alwaysActive is the fence of a cache that is always the boot server.
type alwaysActive struct{}

func (alwaysActive) Active() (uint64, bool) { return 1, true }
