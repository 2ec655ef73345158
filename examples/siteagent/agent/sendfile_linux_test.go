package agent_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/sendfile"
)

// TestImagesSentRaw: the agent's boot HTTP server sends a cached image through
// internal/sendfile's connections: with raw sendfile(2) calls, since the kernel it just
// pulled is in the page cache.
func TestImagesSentRaw(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	e := entry(4, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	kernel := kernelURL(t, scriptURL(a, e))
	waitFor(t, "kernel cached", func() bool { return status(t, kernel) == http.StatusOK })

	raw0, _ := sendfile.Calls()
	res, err := http.Get(kernel)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil || n != 64<<10 {
		t.Fatalf("kernel: %d bytes, %v; want 65536", n, err)
	}
	if raw, _ := sendfile.Calls(); raw == raw0 {
		t.Fatal("the kernel went out without a raw sendfile(2) call: the HTTP listener is not internal/sendfile's")
	}
}
