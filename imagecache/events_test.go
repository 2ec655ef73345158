package imagecache_test

import (
	"context"
	"crypto/sha256"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/imagecache"
)

// A served image and a refused grant are cache events from the requester's address,
// with the digest and never the grant's token.
func TestEvents(t *testing.T) {
	var mu sync.Mutex
	var got []bootevents.Event
	cfg := fastConfig(t)
	cfg.Events = bootevents.SinkFunc(func(e bootevents.Event) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
	})
	var active atomic.Bool
	active.Store(true)
	cfg.Fence = boolFence{&active}
	c := open(t, cfg)
	body := randomBytes(21, 9000)
	img := imagecache.Image{URL: newSource(t, body, "good", false).URL(), SHA256: sha256.Sum256(body), Format: "raw"}
	if err := c.Pull(context.Background(), img); err != nil {
		t.Fatal(err)
	}
	g, err := c.SanbootGrant(img.SHA256, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", g.Path(imagecache.Digest{}), nil)
	r.RemoteAddr = "192.0.2.40:50000"
	c.ServeHTTP(httptest.NewRecorder(), r)
	r = httptest.NewRequest("GET", "/cache/t/"+strings.Repeat("0", imagecache.TokenLen)+"/"+img.SHA256.String(), nil)
	r.RemoteAddr = "192.0.2.40:50001"
	c.ServeHTTP(httptest.NewRecorder(), r)

	if len(got) != 2 {
		t.Fatalf("events: %+v", got)
	}
	served, refused := got[0], got[1]
	if served.Stage != bootevents.StageCache || served.Outcome != bootevents.OutcomeOK || served.Bytes != 9000 ||
		served.Peer.String() != "192.0.2.40:50000" || served.Detail != "sha256:"+img.SHA256.String()[:12] {
		t.Errorf("served = %+v", served)
	}
	if refused.Outcome != bootevents.OutcomeRefused || refused.Reason != "unknown-grant" {
		t.Errorf("refused = %+v", refused)
	}
	for _, e := range got {
		if strings.Contains(e.Detail, g.Token) || strings.Contains(e.Reason, g.Token) {
			t.Errorf("event carries the grant's token: %+v", e)
		}
	}
}
