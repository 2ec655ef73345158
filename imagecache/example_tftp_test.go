package imagecache_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/tftpd"
	"github.com/bettercompute/siteboot/tftpd/tftpdtest"
)

// A host serves its cache over TFTP under the same grants as over HTTP: tftpd's FS is the
// cache's GrantFS, and the machine fetches t/GRANT/SHA256. A plain digest is not found, and
// tftpd's report says why.
func ExampleCache_GrantFS() {
	image := []byte("a kernel")
	source := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(image) }))
	defer source.Close()
	dir, _ := os.MkdirTemp("", "imagecache-example")
	defer os.RemoveAll(dir)
	cache, err := imagecache.Open(context.Background(), imagecache.Config{
		Dir:                   dir,
		Fence:                 imagecache.FenceFunc(func() (uint64, bool) { return 1, true }),
		AllowedSourceNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()
	img := imagecache.Image{URL: source.URL + "/vmlinuz", SHA256: sha256.Sum256(image)}
	if err := cache.Pull(context.Background(), img); err != nil {
		fmt.Println(err)
		return
	}

	reports := make(chan tftpd.Transfer, 2)
	srv, err := tftpdtest.NewServer(nil, &tftpd.Server{
		FS:         cache.GrantFS(),
		OnTransfer: func(t tftpd.Transfer) { reports <- t },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	grant, _ := cache.BootGrant(time.Time{})
	name := strings.TrimPrefix(grant.Path(img.SHA256), "/cache/") // t/GRANT/SHA256
	for _, n := range []string{name, img.SHA256.String()} {
		body, _, err := tftpdtest.Fetch(srv.Addr, n, 1468)
		t := <-reports
		var refused *imagecache.GrantError
		if errors.As(t.Err, &refused) {
			fmt.Println(t.Outcome, refused.Reason, err != nil)
			continue
		}
		fmt.Println(t.Outcome, string(body))
	}
	// Output:
	// ok a kernel
	// not-found malformed true
}
