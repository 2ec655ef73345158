package imagecache_test

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
)

// The crash test re-executes the test binary as a child that opens the cache and pulls one
// image; the child's configuration comes from these variables.
const (
	crashChildEnv = "IMAGECACHE_CRASH_CHILD_DIR"
	crashURLEnv   = "IMAGECACHE_CRASH_URL"
	crashSHAEnv   = "IMAGECACHE_CRASH_SHA256"
)

func crashChild() {
	d, err := imagecache.ParseDigest(os.Getenv(crashSHAEnv))
	if err != nil {
		os.Exit(2)
	}
	c, err := imagecache.Open(context.Background(), imagecache.Config{
		Dir:                   os.Getenv(crashChildEnv),
		StallTimeout:          10 * time.Second,
		RetryDelay:            time.Millisecond,
		AllowedSourceNetworks: loopback,
	})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(3)
	}
	if err := c.Pull(context.Background(), imagecache.Image{URL: os.Getenv(crashURLEnv), SHA256: d}); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(4)
	}
	c.Close()
	os.Exit(0)
}

// tempSize returns the size of the pull's partial copy in dir, or -1 when there is none.
func tempSize(dir string) int64 {
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".pull-") && !strings.HasSuffix(de.Name(), ".meta") {
			if fi, err := de.Info(); err == nil {
				return fi.Size()
			}
		}
	}
	return -1
}

// A child pulling a large image is killed with SIGKILL at random points: at a random byte
// of the transfer, or in the commit after the last byte (fsync, rename). After each kill no
// partial or wrong file is visible, and a restarted cache completes the pull, resuming the
// partial copy it finds.
func TestCrashSIGKILL(t *testing.T) {
	t.Parallel()
	const kills = 32
	body := randomBytes(7, 8<<20)
	digest := imagecache.Digest(sha256.Sum256(body))
	img := imagecache.Image{URL: "", SHA256: digest}
	src := newSource(t, body, "good", false)
	img.URL = src.URL()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var interrupted, finished int
	for i := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashURLEnv+"="+src.URL(), crashSHAEnv+"="+digest.String())
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		// Kill point: during start-up (10%), at a random byte of the transfer (70%), or
		// within 60 ms after the last byte landed, while the pull commits (20%).
		var at int64 = -1
		var after time.Duration
		switch p := rng.Float64(); {
		case p < 0.1:
			after = time.Duration(rng.Int64N(int64(30 * time.Millisecond)))
		case p < 0.8:
			at = rng.Int64N(int64(len(body)))
		default:
			at = int64(len(body))
			after = time.Duration(rng.Int64N(int64(60 * time.Millisecond)))
		}
		deadline := time.Now().Add(20 * time.Second)
	wait:
		for at >= 0 && time.Now().Before(deadline) {
			select {
			case <-exited:
				break wait
			default:
			}
			if tempSize(dir) >= at {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		time.Sleep(after)
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited

		// What the kill left: never a visible partial or wrong file.
		checkVisibleVerified(t, dir)
		vis := visibleFiles(t, dir)
		if len(vis) > 1 || (len(vis) == 1 && vis[0] != digest.String()) {
			t.Fatalf("kill %d at byte %d: visible files %v", i, at, vis)
		}
		if len(vis) == 1 {
			finished++
		}
		if tempSize(dir) >= 0 {
			interrupted++
		}

		// Restart: the pull completes, resuming the partial copy when there is one.
		c, err := imagecache.Open(context.Background(), imagecache.Config{Dir: dir, RetryDelay: time.Millisecond, AllowedSourceNetworks: loopback})
		if err != nil {
			t.Fatalf("restart after kill %d: %v", i, err)
		}
		if err := c.Pull(context.Background(), img); err != nil {
			t.Fatalf("pull after kill %d: %v", i, err)
		}
		c.Close()
		if vis := visibleFiles(t, dir); len(vis) != 1 {
			t.Fatalf("after the restarted pull, visible files %v", vis)
		}
		checkVisibleVerified(t, dir)
		if err := os.Remove(filepath.Join(dir, digest.String())); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, ".stamp-"+digest.String()))
	}
	t.Logf("%d kills: %d left a partial temp file, %d found the pull committed", kills, interrupted, finished)
	if interrupted == 0 {
		t.Errorf("no kill interrupted a transfer; the test did not exercise a crash mid-pull")
	}
}
