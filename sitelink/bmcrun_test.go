package sitelink_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/sitelink"
)

// grantImages is a sitelink.BMCImages over a set of digests; it records grants minted and
// revoked.
type grantImages struct {
	mu      sync.Mutex
	have    map[string]bool
	minted  []string
	revoked []string
}

func (im *grantImages) Check(sum string) error {
	if !im.have[sum] {
		return errors.New("image " + sum + " is not in the cache")
	}
	return nil
}

func (im *grantImages) Mint(sum string) (string, string, error) {
	im.mu.Lock()
	defer im.mu.Unlock()
	g := "grant" + string(rune('A'+len(im.minted)))
	im.minted = append(im.minted, g)
	return "http://192.0.2.2/cache/t/" + g + "/" + sum, g, nil
}

func (im *grantImages) Revoke(g string) {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.revoked = append(im.revoked, g)
}

// firmwareBMC updates firmware and echoes the URL it was given into its message.
type firmwareBMC struct{ url string }

func (f *firmwareBMC) Open(context.Context, bmc.Target) (bmc.Driver, error) { return f, nil }
func (f *firmwareBMC) Name() string                                         { return "fake" }
func (f *firmwareBMC) Close() error                                         { return nil }
func (f *firmwareBMC) UpdateFirmware(_ context.Context, u bmc.FirmwareUpdate) (bmc.FirmwareResult, error) {
	f.url = u.URL
	return bmc.FirmwareResult{State: "Completed"}, &bmc.OpError{Kind: bmc.ErrRefused, Message: "could not fetch " + u.URL}
}

// TestRunBMC: an image not served is refused before anything is sent; a firmware update
// gets a URL under a grant minted when it is sent, the grant is revoked once the update is
// over, and the result never carries it.
func TestRunBMC(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	im := &grantImages{have: map[string]bool{sum: true}}
	drv := &firmwareBMC{}
	exec := &bmc.Executor{Opener: drv, Credentials: bmc.CredentialsFunc(func(context.Context, string) (bmc.Credential, error) {
		return bmc.Credential{Username: "admin", Password: "x"}, nil
	})}
	cmd := func(id, sha string) sitelink.Command {
		return sitelink.Command{ID: id, Kind: sitelink.KindBMCFirmware, BMC: &sitelink.BMCCommand{
			Target: sitelink.BMCTarget{Driver: "fake", Address: "198.51.100.10", Credential: "bmc-1"}, SHA256: sha}}
	}

	res := sitelink.RunBMC(context.Background(), exec, im, cmd("fw-missing", strings.Repeat("cd", 32)))
	if res.Status != string(bmc.StatusNotSent) || !strings.Contains(res.Message, "not in the cache") || len(im.minted) != 0 || drv.url != "" {
		t.Fatalf("an image not cached: %+v, minted %v, sent %q; want not sent, nothing minted", res, im.minted, drv.url)
	}
	if res := sitelink.RunBMC(context.Background(), exec, nil, cmd("fw-no-grantImages", sum)); res.Status != string(bmc.StatusNotSent) {
		t.Errorf("no grantImages: %+v, want not sent", res)
	}

	res = sitelink.RunBMC(context.Background(), exec, im, cmd("fw-1", sum))
	if len(im.minted) != 1 || !strings.Contains(drv.url, "/t/"+im.minted[0]+"/"+sum) {
		t.Fatalf("minted %v, the BMC got %q", im.minted, drv.url)
	}
	if len(im.revoked) != 1 || im.revoked[0] != im.minted[0] {
		t.Errorf("revoked %v, want the firmware's grant %v", im.revoked, im.minted)
	}
	if strings.Contains(res.Message, im.minted[0]) || !strings.Contains(res.Message, "/t/GRANT/") {
		t.Errorf("result message %q: want the grant replaced by GRANT", res.Message)
	}
}
