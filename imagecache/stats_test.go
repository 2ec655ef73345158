package imagecache_test

import (
	"context"
	"crypto/sha256"
	"reflect"
	"testing"

	"github.com/bettercompute/siteboot/imagecache"
)

// TestStatsAreUint64: every counter of Stats is a uint64, and a pull moves the ones it
// should.
func TestStatsAreUint64(t *testing.T) {
	body := randomBytes(21, 9000)
	src := newSource(t, body, "good", false)
	c := open(t, fastConfig(t))
	if err := c.Pull(context.Background(), imagecache.Image{URL: src.URL(), SHA256: sha256.Sum256(body), Format: "raw"}); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	v := reflect.ValueOf(s)
	for n := range v.NumField() {
		if f := v.Type().Field(n); f.Type.Kind() != reflect.Uint64 {
			t.Errorf("Stats.%s is %s, want uint64", f.Name, f.Type)
		}
	}
	if s.PullsOK != 1 || s.PullsStarted != 1 || s.BytesPulled != uint64(len(body)) || s.PullsFailed != 0 {
		t.Errorf("after one pull: started %d ok %d failed %d bytes %d", s.PullsStarted, s.PullsOK, s.PullsFailed, s.BytesPulled)
	}
}
