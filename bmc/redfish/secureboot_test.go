package redfish_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

func TestSecureBootEnable(t *testing.T) {
	ctx := context.Background()
	srv := bmctest.NewServer(bmctest.Options{})
	defer srv.Close()
	d, err := redfish.Dial(ctx, redfish.Config{}, target(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// The DMTF mockup links a SecureBoot resource it does not serve.
	if _, err := d.SecureBoot(ctx); bmc.KindOf(err) != bmc.ErrUnsupported {
		t.Fatalf("SecureBoot without the resource = %v, want ErrUnsupported", err)
	}
	sb := srv.SystemPath() + "/SecureBoot"
	srv.Put(sb, "", map[string]any{"@odata.id": sb, "@odata.type": "#SecureBoot.v1_1_0.SecureBoot", "Id": "SecureBoot",
		"SecureBootEnable": false, "SecureBootCurrentBoot": "Disabled", "SecureBootMode": "UserMode"})
	st, err := d.SecureBoot(ctx)
	if err != nil || st.Enabled || st.CurrentBoot != "Disabled" || st.Mode != "UserMode" {
		t.Fatalf("SecureBoot = %+v, %v", st, err)
	}
	srv.ResetRequests()
	if err := d.SetSecureBoot(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got := srv.Resource(sb)["SecureBootEnable"]; got != true {
		t.Errorf("the BMC holds SecureBootEnable %v, want true", got)
	}
	var patches []bmctest.Request
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPatch {
			patches = append(patches, r)
		}
	}
	if len(patches) != 1 || patches[0].Path != sb || patches[0].IfMatch == "" || patches[0].JSON()["SecureBootEnable"] != true {
		t.Errorf("PATCHes %+v, want one of SecureBootEnable true with If-Match", patches)
	}
	if st, err := d.SecureBoot(ctx); err != nil || !st.Enabled {
		t.Errorf("after enabling: %+v, %v", st, err)
	}
	// Enabling what is enabled sends nothing.
	srv.ResetRequests()
	if err := d.SetSecureBoot(ctx, true); err != nil {
		t.Fatal(err)
	}
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPatch {
			t.Errorf("a second enable sent %s %s", r.Method, r.Path)
		}
	}
}

var _ bmc.SecureBootController = (*redfish.Driver)(nil)
