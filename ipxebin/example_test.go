package ipxebin_test

import (
	"fmt"
	"net/http"

	"github.com/bettercompute/siteboot/ipxebin"
)

// A boot server hands out the embedded snponly.efi, trusting the CA that issued its own
// HTTPS certificate (nil here: the build as it is).
func Example() {
	builds := &ipxebin.Builds{CA: nil}
	mux := http.NewServeMux()
	mux.HandleFunc("/snponly.efi", func(w http.ResponseWriter, r *http.Request) {
		bin, err := builds.ReadFile(ipxebin.SnponlyX8664)
		if err != nil {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Write(bin)
	})
	bin, err := builds.ReadFile(ipxebin.SnponlyX8664)
	fmt.Println(err == nil, len(bin) > 0)
	// Output: true true
}
