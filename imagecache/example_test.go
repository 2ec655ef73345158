package imagecache_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
)

// A site agent pulls a pinned image, hands a ramdisk a boot grant and serves the image under
// it; a plain /cache/SHA256 is 404.
func Example() {
	image := []byte("a deploy image")
	source := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(image)
	}))
	defer source.Close()

	dir, _ := os.MkdirTemp("", "imagecache-example")
	defer os.RemoveAll(dir)
	cache, err := imagecache.Open(context.Background(), imagecache.Config{
		Dir:   dir,
		Fence: imagecache.FenceFunc(func() (uint64, bool) { return 1, true }), // the boot lease's fence
		// Sources on loopback are refused unless allowed; this example's source is one.
		AllowedSourceNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()

	img := imagecache.Image{URL: source.URL + "/deploy.raw", SHA256: sha256.Sum256(image), Format: "raw"}
	cache.SetPinned([]imagecache.Image{img})
	if err := cache.Pull(context.Background(), img); err != nil { // waits for the background pull
		fmt.Println(err)
		return
	}
	for _, st := range cache.Status() {
		fmt.Println(st.Image.Format, st.State, st.Bytes)
	}

	agent := httptest.NewServer(cache) // the boot server mounts it at /cache/
	defer agent.Close()
	grant, err := cache.BootGrant(time.Time{}) // 6 h, or the boot entry's not-after
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, path := range []string{grant.Path(img.SHA256), "/cache/" + img.SHA256.String()} {
		resp, err := http.Get(agent.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			fmt.Println(resp.StatusCode, resp.Header.Get("ETag") == `"`+img.SHA256.String()+`"`, string(body))
		} else {
			fmt.Println(resp.StatusCode)
		}
	}
	// Output:
	// raw ready 14
	// 200 true a deploy image
	// 404
}

// A ramdisk fetches its deploy image from the cache under its grant, falling back to the
// image's source; here the cache substitutes other bytes, so the source serves it.
func ExampleFetcher_Fetch() {
	image := []byte("the real deploy image")
	digest := imagecache.Digest(sha256.Sum256(image))
	cache := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("a substituted image!!"))
	}))
	defer cache.Close()
	source := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(image)
	}))
	defer source.Close()

	dir, _ := os.MkdirTemp("", "fetch-example")
	defer os.RemoveAll(dir)
	dst := dir + "/deploy.img"
	f := &imagecache.Fetcher{}
	from, err := f.Fetch(context.Background(), digest, dst, cache.URL+"/cache/t/GRANT/"+digest.String(), source.URL+"/deploy.img")
	if err != nil {
		fmt.Println(err)
		return
	}
	got, _ := os.ReadFile(dst)
	fmt.Println(from == source.URL+"/deploy.img", string(got))
	// Output:
	// true the real deploy image
}

// Image sources are checked where the connection is made: a name that resolves to
// loopback (or to a link-local, own or management address) is refused before any byte is
// sent, unless its network is listed as allowed.
func ExampleConfig_sourcePolicy() {
	dir, _ := os.MkdirTemp("", "imagecache-policy")
	defer os.RemoveAll(dir)
	cache, err := imagecache.Open(context.Background(), imagecache.Config{
		Dir:                dir,
		ManagementNetworks: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}, // the BMCs
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()
	d := imagecache.Digest(sha256.Sum256([]byte("an image")))
	for _, url := range []string{"http://localhost:1/image", "http://198.51.100.7/firmware.bin", "http://169.254.169.254/latest"} {
		err := cache.Pull(context.Background(), imagecache.Image{URL: url, SHA256: d})
		var se *imagecache.SourceError
		if errors.As(err, &se) {
			fmt.Println(imagecache.ReasonOf(err), se.Reason)
		}
	}
	// Output:
	// source-refused loopback
	// source-refused management-network
	// source-refused link-local
}
