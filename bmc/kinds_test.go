package bmc_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/ipmi/ipmitest"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/internal/testpeer"
)

// TestErrorKindsAcrossDrivers states the error kinds both drivers keep, each case
// produced by a BMC: ipmi_sim and pyghmi's BMC for IPMI, bmctest's fake (DMTF mockup) and
// loopback sockets for Redfish. Every error is an *bmc.OpError naming its driver; a
// refusal carries the BMC's code and message. IPMI has no TLS: that cell is absent.
//
//	kind          ipmi                                   redfish
//	auth          wrong password (RAKP)                  wrong password (401)
//	unreachable   closed UDP port                        closed TCP port
//	tls           -                                      self-signed certificate
//	scheme        -                                      http:// to a TLS port
//	differs       virtualbmc keeps pxe for BIOS setup    a one-time override kept as Continuous
//	              (ipmi's TestQEMUVirtualBMC)
//	timeout       ipmi_sim stopped (SIGSTOP) mid-session server that never answers
//	refused       ipmi_sim LAN parameter 0xff            firmware task Exception
//	unsupported   pyghmi: Get User Access 0xc1            UEFI HTTP boot not allowed
//	no-session    ipmi_sim out of sessions               bmctest with MaxSessions 1 (Base SessionLimitExceeded)
//	in-progress   a repeat of a running operation id     the same
func TestErrorKindsAcrossDrivers(t *testing.T) {
	sim := ipmitest.StartSim(t, ipmitest.SimOptions{})
	py := ipmitest.StartPyghmi(t)
	ctx := func() context.Context {
		c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		return c
	}
	icfg := ipmi.Config{CipherSuites: []int{3}, Timeout: 300 * time.Millisecond, Retries: 1}
	idial := func(tg bmc.Target) (*ipmi.Driver, error) { return ipmi.Dial(ctx(), icfg, tg) }
	rf := func(o bmctest.Options) (*bmctest.Server, bmc.Target) {
		srv := bmctest.NewServer(o)
		t.Cleanup(srv.Close)
		return srv, bmc.Target{Driver: redfish.Name, Address: srv.URL, Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}
	}
	rdial := func(cfg redfish.Config, tg bmc.Target) (*redfish.Driver, error) { return redfish.Dial(ctx(), cfg, tg) }

	cases := []struct {
		driver, kind string
		want         error
		code, msg    string // substrings the error must carry
		run          func(t *testing.T) error
	}{
		{"ipmi", "auth", bmc.ErrAuth, "", "", func(t *testing.T) error {
			tg := sim.Target()
			tg.Password = "wrong"
			_, err := idial(tg)
			return err
		}},
		{"ipmi", "unreachable", bmc.ErrUnreachable, "", "", func(t *testing.T) error {
			tg := sim.Target()
			tg.Address = "127.0.0.1:" + strconv.Itoa(testpeer.FreePort(t, "udp"))
			_, err := idial(tg)
			return err
		}},
		{"ipmi", "timeout", bmc.ErrTimeout, "", "", func(t *testing.T) error {
			s := ipmitest.StartSim(t, ipmitest.SimOptions{})
			d, err := idial(s.Target())
			if err != nil {
				return err
			}
			defer d.Close()
			pid := s.Proc.PID()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			defer syscall.Kill(pid, syscall.SIGCONT)
			_, err = d.PowerState(ctx())
			return err
		}},
		{"ipmi", "refused", bmc.ErrRefused, "0xff", "Unspecified error", func(t *testing.T) error {
			d, err := idial(sim.Target())
			if err != nil {
				return err
			}
			defer d.Close()
			sim.FailLAN(t, "ip_addr")
			defer sim.FailLAN(t)
			_, err = d.Inspect(ctx())
			var pe *bmc.PartialError
			if !errors.As(err, &pe) {
				t.Fatalf("not partial: %v", err)
			}
			return pe.Parts[0].Err
		}},
		{"ipmi", "unsupported", bmc.ErrUnsupported, "0xc1", "Invalid command", func(t *testing.T) error {
			d, err := idial(py.Target())
			if err != nil {
				return err
			}
			defer d.Close()
			return d.RotatePassword(ctx(), ipmitest.User, "new-pass")
		}},
		{"ipmi", "no-session", bmc.ErrNoSession, "", "no free session", func(t *testing.T) error {
			s := ipmitest.StartSim(t, ipmitest.SimOptions{})
			for range 100 {
				d, err := idial(s.Target())
				if err != nil {
					return err
				}
				t.Cleanup(func() { _ = d.Close() })
			}
			t.Fatal("100 sessions and none refused")
			return nil
		}},
		{"ipmi", "in-progress", bmc.ErrInProgress, "", "still running", func(t *testing.T) error {
			d, err := idial(sim.Target())
			if err != nil {
				return err
			}
			defer d.Close()
			return inProgress(t, func(c context.Context) error { return d.SetPower(c, bmc.PowerActionOn) })
		}},
		{"redfish", "auth", bmc.ErrAuth, "", "", func(t *testing.T) error {
			_, tg := rf(bmctest.Options{})
			tg.Password = "wrong"
			_, err := rdial(redfish.Config{}, tg)
			return err
		}},
		{"redfish", "no-session", bmc.ErrNoSession, "Base.1.8.SessionLimitExceeded", "session limit", func(t *testing.T) error {
			_, tg := rf(bmctest.Options{MaxSessions: 1})
			d, err := rdial(redfish.Config{}, tg)
			if err != nil {
				return err
			}
			t.Cleanup(func() { _ = d.Close() })
			_, err = rdial(redfish.Config{}, tg)
			return err
		}},
		{"redfish", "unreachable", bmc.ErrUnreachable, "", "", func(t *testing.T) error {
			_, tg := rf(bmctest.Options{})
			tg.Address = "http://127.0.0.1:" + strconv.Itoa(testpeer.FreePort(t, "tcp"))
			_, err := rdial(redfish.Config{}, tg)
			return err
		}},
		{"redfish", "tls", bmc.ErrTLS, "", "", func(t *testing.T) error {
			_, tg := rf(bmctest.Options{TLS: true})
			_, err := rdial(redfish.Config{}, tg)
			return err
		}},
		{"redfish", "timeout", bmc.ErrTimeout, "", "", func(t *testing.T) error {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			done := make(chan struct{})
			defer close(done)
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					go func() { <-done; c.Close() }()
				}
			}()
			_, err = rdial(redfish.Config{Timeout: 200 * time.Millisecond},
				bmc.Target{Address: "http://" + l.Addr().String(), Username: "u", Password: "p"})
			return err
		}},
		{"redfish", "scheme", bmc.ErrScheme, "", "use https://", func(t *testing.T) error {
			_, tg := rf(bmctest.Options{TLS: true})
			tg.Address = strings.Replace(tg.Address, "https://", "http://", 1)
			_, err := rdial(redfish.Config{}, tg)
			return err
		}},
		{"redfish", "differs", bmc.ErrDiffers, "", "kept BootSourceOverrideEnabled Continuous", func(t *testing.T) error {
			_, tg := rf(bmctest.Options{OnceStoredAsContinuous: true})
			d, err := rdial(redfish.Config{}, tg)
			if err != nil {
				return err
			}
			defer d.Close()
			return d.SetBootDevice(ctx(), bmc.BootDevice{Target: bmc.BootPXE})
		}},
		{"redfish", "refused", bmc.ErrRefused, "", "signature verification failed", func(t *testing.T) error {
			_, tg := rf(bmctest.Options{FailUpdate: true})
			d, err := rdial(redfish.Config{PollInterval: 10 * time.Millisecond}, tg)
			if err != nil {
				return err
			}
			defer d.Close()
			_, err = d.UpdateFirmware(ctx(), bmc.FirmwareUpdate{URL: "http://192.0.2.1/fw.bin"})
			return err
		}},
		{"redfish", "unsupported", bmc.ErrUnsupported, "", "", func(t *testing.T) error {
			_, tg := rf(bmctest.Options{})
			d, err := rdial(redfish.Config{}, tg)
			if err != nil {
				return err
			}
			defer d.Close()
			return d.SetBootDevice(ctx(), bmc.BootDevice{Target: bmc.BootHTTP, Mode: bmc.BootModeUEFI})
		}},
		{"redfish", "in-progress", bmc.ErrInProgress, "", "still running", func(t *testing.T) error {
			_, tg := rf(bmctest.Options{})
			d, err := rdial(redfish.Config{}, tg)
			if err != nil {
				return err
			}
			defer d.Close()
			return inProgress(t, func(c context.Context) error { return d.SetPower(c, bmc.PowerActionOn) })
		}},
	}
	for _, c := range cases {
		t.Run(c.driver+"/"+c.kind, func(t *testing.T) {
			err := c.run(t)
			if !errors.Is(err, c.want) || bmc.KindOf(err) != c.want {
				t.Fatalf("error %v: want kind %v (KindOf %v)", err, c.want, bmc.KindOf(err))
			}
			var oe *bmc.OpError
			if !errors.As(err, &oe) {
				t.Fatalf("%T is not a *bmc.OpError", err)
			}
			if c.want != bmc.ErrInProgress && oe.Driver != c.driver {
				t.Errorf("OpError.Driver = %q, want %q", oe.Driver, c.driver)
			}
			if !strings.Contains(oe.Code, c.code) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q (code %q): want code %q and message %q", err, oe.Code, c.code, c.msg)
			}
			if strings.Contains(err.Error(), ipmitest.Pass) || strings.Contains(err.Error(), bmctest.DefaultPassword) {
				t.Errorf("error shows a password: %v", err)
			}
			if got := bmc.KindByName(bmc.KindName(err)); got != c.want {
				t.Errorf("kind name %q does not name %v", bmc.KindName(err), c.want)
			}
		})
	}
}

// inProgress runs op under an id and, while it is still running, repeats the id.
func inProgress(t *testing.T, op func(context.Context) error) error {
	var r bmc.Runner
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- r.Run(context.Background(), "op-1", "power", func(c context.Context) error {
			err := op(c)
			close(started)
			<-release
			return err
		})
	}()
	<-started
	err := r.Run(context.Background(), "op-1", "power", func(context.Context) error {
		t.Error("a repeat ran while the first was running")
		return nil
	})
	close(release)
	if first := <-done; first != nil {
		t.Fatalf("first run: %v", first)
	}
	return err
}
