package tftpdtest_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/bettercompute/siteboot/tftpd"
	"github.com/bettercompute/siteboot/tftpd/tftpdtest"
	"go.uber.org/goleak"
)

// TestMain checks that Close leaves no goroutine of the server behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServerAndFetch(t *testing.T) {
	data := []byte(strings.Repeat("iPXE", 1000))
	s, err := tftpdtest.NewServer(fstest.MapFS{"ipxe.efi": {Data: data}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, blk := range []int{0, 512, 1468} {
		got, size, err := tftpdtest.Fetch(s.Addr, "ipxe.efi", blk)
		if err != nil || string(got) != string(data) {
			t.Fatalf("blksize %d: %d bytes, %v", blk, len(got), err)
		}
		if size != int64(len(data)) {
			t.Errorf("blksize %d: tsize %d, want %d", blk, size, len(data))
		}
	}
	if _, _, err := tftpdtest.Fetch(s.Addr, "missing.efi", 0); err == nil || !strings.Contains(err.Error(), "file not found") {
		t.Errorf("fetch of a missing file: %v", err)
	}
	s.Close()
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	s.Close() // a second Close does nothing
	if c := s.Stats(); c.Completed != 3 || c.NotFound != 1 {
		t.Errorf("counters %+v", c)
	}
}

func TestNewServerRefusesBadConfig(t *testing.T) {
	if _, err := tftpdtest.NewServer(nil, &tftpd.Server{}); err == nil {
		t.Fatal("NewServer accepted a server with neither Dir nor FS")
	}
}

func Example() {
	s, err := tftpdtest.NewServer(fstest.MapFS{"undionly.kpxe": {Data: []byte("legacy iPXE")}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	b, size, err := tftpdtest.Fetch(s.Addr, "undionly.kpxe", 1468)
	fmt.Printf("%q %d %v\n", b, size, err)
	// Output: "legacy iPXE" 11 <nil>
}
