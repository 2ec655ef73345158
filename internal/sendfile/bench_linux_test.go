package sendfile

import (
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

// BenchmarkServeContent: GETs of a cached 32 MiB file (the storm's deploy image) over
// loopback from an HTTP server serving it with http.ServeContent, on net's listener ("net")
// and on this package's ("raw"), four clients at once. cpu-ns/op is the whole process's
// CPU per GET (client and server: they share the process, as in the storm they share its
// two cores).
func BenchmarkServeContent(b *testing.B) {
	for _, bc := range []struct {
		name string
		wrap func(net.Listener) net.Listener
	}{
		{"net", func(ln net.Listener) net.Listener { return ln }},
		{"raw", Listener},
	} {
		b.Run(bc.name, func(b *testing.B) { benchServe(b, bc.wrap) })
	}
}

func benchServe(b *testing.B, wrap func(net.Listener) net.Listener) {
	const size = 32 << 20
	p := b.TempDir() + "/image"
	if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
		b.Fatal(err)
	}
	url := serve(b, p, wrap)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	get := func() {
		res, err := client.Get(url)
		if err != nil {
			b.Error(err)
			return
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if n != size {
			b.Errorf("%d bytes, want %d", n, size)
		}
	}
	get() // connections up, pages cached
	b.SetBytes(size)
	b.SetParallelism(2) // 2 x GOMAXPROCS clients
	cpu0 := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			get()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
