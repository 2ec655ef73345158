package redfish_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

// TestErrorKinds states the kind each failure of the driver has, with what the error
// must say (the BMC's own message where it gave one) and must not (the password).
func TestErrorKinds(t *testing.T) {
	closed := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	dialOnly := func(opts bmctest.Options, mod func(*bmc.Target, *bmctest.Server), cfg redfish.Config) func(t *testing.T) error {
		return func(t *testing.T) error {
			srv := bmctest.NewServer(opts)
			t.Cleanup(srv.Close)
			tg := target(srv)
			if mod != nil {
				mod(&tg, srv)
			}
			d, err := redfish.Dial(ctx(t), cfg, tg)
			if d != nil {
				_ = d.Close()
			}
			return err
		}
	}
	with := func(opts bmctest.Options, op func(*bmctest.Server, *redfish.Driver) error) func(t *testing.T) error {
		return func(t *testing.T) error {
			srv, d := start(t, opts, redfish.Config{})
			return op(srv, d)
		}
	}
	tests := []struct {
		name string
		run  func(t *testing.T) error
		kind error
		says string
	}{
		{"wrong password", dialOnly(bmctest.Options{}, func(tg *bmc.Target, _ *bmctest.Server) { tg.Password = "secret-wrong" }, redfish.Config{}),
			bmc.ErrAuth, "401"},
		{"nothing listening", func(t *testing.T) error {
			_, err := redfish.Dial(ctx(t), redfish.Config{}, bmc.Target{Address: "http://" + closed(t), Username: "u", Password: "p"})
			return err
		}, bmc.ErrUnreachable, "cannot"},
		{"untrusted certificate", dialOnly(bmctest.Options{TLS: true}, nil, redfish.Config{}), bmc.ErrTLS, "not trusted"},
		{"http:// to a TLS port", dialOnly(bmctest.Options{TLS: true}, func(tg *bmc.Target, _ *bmctest.Server) {
			tg.Address = strings.Replace(tg.Address, "https://", "http://", 1)
		}, redfish.Config{}), bmc.ErrScheme, "use https://"},
		{"no SessionService, sessions only", dialOnly(bmctest.Options{NoSessionService: true}, nil, redfish.Config{SessionOnly: true}),
			bmc.ErrUnsupported, "SessionService"},
		{"the BMC says no", with(bmctest.Options{Patch200ErrorBody: true}, func(_ *bmctest.Server, d *redfish.Driver) error {
			return d.SetBootDevice(context.Background(), bmc.BootDevice{Target: bmc.BootCD})
		}), bmc.ErrRefused, "The boot override could not be applied."},
		{"accepted, carried out differently", with(bmctest.Options{OnceStoredAsContinuous: true}, func(_ *bmctest.Server, d *redfish.Driver) error {
			return d.SetBootDevice(context.Background(), bmc.BootDevice{Target: bmc.BootCD})
		}), bmc.ErrDiffers, "kept BootSourceOverrideEnabled Continuous"},
		{"not offered", with(bmctest.Options{Mockup: bmctest.OpenBMC}, func(_ *bmctest.Server, d *redfish.Driver) error {
			return d.InsertMedia(context.Background(), "http://192.0.2.1/a.iso")
		}), bmc.ErrUnsupported, "no virtual CD"},
		{"power never reaches the state", func(t *testing.T) error {
			_, d := start(t, bmctest.Options{PowerOffPolls: 1000}, redfish.Config{PowerTimeout: 20 * time.Millisecond})
			return d.SetPower(ctx(t), bmc.PowerActionForceOff)
		}, bmc.ErrTimeout, "still reports PoweringOff"},
		{"a part missing", with(bmctest.Options{Mockup: bmctest.HPEDL325}, func(srv *bmctest.Server, d *redfish.Driver) error {
			srv.Delete("/redfish/v1/Managers/1", "")
			_, err := d.Inspect(context.Background())
			return err
		}), bmc.ErrPartial, "manager /redfish/v1/Managers/1 failed"},
		{"closed", with(bmctest.Options{}, func(_ *bmctest.Server, d *redfish.Driver) error {
			_ = d.Close()
			_, err := d.PowerState(context.Background())
			return err
		}), bmc.ErrClosed, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(t)
			if got := bmc.KindOf(err); got != tc.kind {
				t.Fatalf("kind %v, want %v (err %v)", got, tc.kind, err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%q does not say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), "secret-wrong") || strings.Contains(err.Error(), bmctest.DefaultPassword) {
				t.Errorf("%q holds a password", err)
			}
			var oe *bmc.OpError
			var pe *bmc.PartialError
			if !errors.As(err, &oe) && !errors.As(err, &pe) {
				t.Errorf("%T is neither *bmc.OpError nor *bmc.PartialError", err)
			}
		})
	}
}
