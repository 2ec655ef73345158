package tftpd_test

import (
	"io"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/bettercompute/siteboot/tftpd"
	"github.com/pin/tftp/v3"
)

// BenchmarkTransfer fetches an 8 MiB file over loopback with pin/tftp's client.
func BenchmarkTransfer(b *testing.B) {
	data := payload(8<<20, 11)
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: data}}}
	addr := serve(b, srv, "127.0.0.1")
	for _, blk := range []int{1468, 65464} {
		b.Run(strconv.Itoa(blk), func(b *testing.B) {
			c, err := tftp.NewClient(addr.String())
			if err != nil {
				b.Fatal(err)
			}
			c.SetBlockSize(blk)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				wt, err := c.Receive("f", "octet")
				if err != nil {
					b.Fatal(err)
				}
				if n, err := wt.WriteTo(io.Discard); err != nil || n != int64(len(data)) {
					b.Fatalf("got %d bytes, %v", n, err)
				}
			}
		})
	}
}
