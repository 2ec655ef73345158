package tftpd_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing/fstest"

	"github.com/bettercompute/siteboot/tftpd"
	"github.com/pin/tftp/v3"
)

// A server over an in-memory file system (an embed.FS in a host), fetched with a TFTP client
// the way UEFI firmware does: blksize 1468 and tsize.
func Example() {
	done := make(chan tftpd.Transfer, 1)
	srv := &tftpd.Server{
		FS:         fstest.MapFS{"ipxe.efi": {Data: []byte("an iPXE build")}},
		OnTransfer: func(t tftpd.Transfer) { done <- t },
	}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(conn) }()

	c, _ := tftp.NewClient(conn.LocalAddr().String())
	c.SetBlockSize(1468)
	c.RequestTSize(true)
	wt, err := c.Receive("/ipxe.efi", "octet")
	if err != nil {
		fmt.Println(err)
		return
	}
	size, _ := wt.(tftp.IncomingTransfer).Size()
	var got bytes.Buffer
	wt.WriteTo(&got)

	t := <-done
	srv.Shutdown(context.Background())
	fmt.Printf("client: %q, tsize %d\n", got.String(), size)
	fmt.Printf("hook: %s %s, %d bytes, blksize %d\n", t.File, t.Outcome, t.Bytes, t.BlockSize)
	fmt.Println("serve:", <-served)
	// Output:
	// client: "an iPXE build", tsize 13
	// hook: ipxe.efi ok, 13 bytes, blksize 1468
	// serve: tftpd: server closed
}
