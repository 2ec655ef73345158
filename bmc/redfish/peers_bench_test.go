package redfish_test

import (
	"context"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/internal/testpeer"
)

// BenchmarkPeers measures each operation against the services of the capability table in
// doc.go: sushy-emulator and DMTF's mockup server (Python, loopback), and bmctest serving
// the iLO 5 and OpenBMC captures. Only operations that succeed on a peer are measured.
//
//	go test -run '^$' -bench Peers -benchtime 20x ./bmc/redfish/
func BenchmarkPeers(b *testing.B) {
	type peer struct {
		name    string
		tg      bmc.Target
		persist bool // one-time boot fails there: measure a persistent one
		media   string
		storage bool
	}
	iso := isoServerB(b)
	s := testpeer.SushyEmulator(b, testpeer.SushyConfig{Username: sushyUser, Password: sushyPass, Extra: sushyStorage})
	m := testpeer.RedfishMockupServer(b, mockupDir("public-rackmount1"))
	ilo := bmctest.NewServer(bmctest.Options{Mockup: bmctest.HPEDL325})
	b.Cleanup(ilo.Close)
	obmc := bmctest.NewServer(bmctest.Options{Mockup: bmctest.OpenBMC})
	b.Cleanup(obmc.Close)
	peers := []peer{
		{name: "sushy-emulator", tg: bmc.Target{Address: s.URL, Username: sushyUser, Password: sushyPass},
			persist: true, media: iso + "/boot.iso", storage: true},
		{name: "dmtf-mockup-server", tg: bmc.Target{Address: m.URL, Username: "Administrator", Password: "any"},
			media: "http://192.0.2.1/boot.iso", storage: true},
		{name: "ilo5-capture", tg: target(ilo), media: "http://192.0.2.1/boot.iso", storage: true},
		{name: "openbmc-capture", tg: target(obmc), storage: true},
	}
	cfg := redfish.Config{PollInterval: 50 * time.Millisecond, SettleTime: -1}
	ctx := context.Background()
	for _, p := range peers {
		p.tg.Driver = redfish.Name
		b.Run(p.name+"/open-close", func(b *testing.B) {
			for b.Loop() {
				d, err := redfish.Dial(ctx, cfg, p.tg)
				if err != nil {
					b.Fatal(err)
				}
				_ = d.Close()
			}
		})
		d, err := redfish.Dial(ctx, cfg, p.tg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(p.name+"/power-state", func(b *testing.B) {
			for b.Loop() {
				if _, err := d.PowerState(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(p.name+"/set-boot", func(b *testing.B) {
			for b.Loop() {
				if err := d.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE, Persistent: p.persist}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(p.name+"/inspect", func(b *testing.B) {
			for b.Loop() {
				if _, err := d.Inspect(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		if p.media != "" {
			b.Run(p.name+"/insert-eject", func(b *testing.B) {
				for b.Loop() {
					if err := d.InsertMedia(ctx, p.media); err != nil {
						b.Fatal(err)
					}
					if err := d.EjectMedia(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		if p.storage {
			b.Run(p.name+"/storage", func(b *testing.B) {
				for b.Loop() {
					if _, err := d.Storage(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		_ = d.Close()
	}
}
