package bmctest_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/bettercompute/siteboot/bmc/bmctest"
)

// A fake HPE iLO: a Boot PATCH naming BootSourceOverrideMode is refused, and the test
// can see both what was sent and what changed.
func Example() {
	srv := bmctest.NewServer(bmctest.Options{Vendor: bmctest.HPEiLO})
	defer srv.Close()

	patch := func(body string) int {
		req, _ := http.NewRequest(http.MethodPatch, srv.URL+bmctest.SystemPath, strings.NewReader(body))
		req.SetBasicAuth(bmctest.DefaultUsername, bmctest.DefaultPassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	fmt.Println(patch(`{"Boot":{"BootSourceOverrideTarget":"Hdd","BootSourceOverrideMode":"UEFI"}}`))
	fmt.Println(patch(`{"Boot":{"BootSourceOverrideTarget":"Hdd","BootSourceOverrideEnabled":"Once"}}`))

	for _, r := range srv.Requests() {
		fmt.Println(r.Method, r.Path, r.Auth, r.Status)
	}
	fmt.Println(srv.Resource(bmctest.SystemPath)["Boot"].(map[string]any)["BootSourceOverrideTarget"])
	// Output:
	// 400
	// 200
	// PATCH /redfish/v1/Systems/437XR1138R2 basic 400
	// PATCH /redfish/v1/Systems/437XR1138R2 basic 200
	// Hdd
}
