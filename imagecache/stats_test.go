package imagecache_test

import (
	"context"
	"crypto/sha256"
	"reflect"
	"testing"

	"github.com/bettercompute/siteboot/imagecache"
)

// TestCountersMatchDeprecatedStats: Counters (uint64) and the deprecated Stats (int64)
// report the same numbers, field by field, after real work.
func TestCountersMatchDeprecatedStats(t *testing.T) {
	body := randomBytes(21, 9000)
	src := newSource(t, body, "good", false)
	c := open(t, fastConfig(t))
	if err := c.Pull(context.Background(), imagecache.Image{URL: src.URL(), SHA256: sha256.Sum256(body), Format: "raw"}); err != nil {
		t.Fatal(err)
	}
	u, i := reflect.ValueOf(c.Counters()), reflect.ValueOf(c.Stats())
	if u.NumField() != i.NumField() {
		t.Fatalf("Stats has %d fields, StatsInt64 %d", u.NumField(), i.NumField())
	}
	for n := range u.NumField() {
		name := u.Type().Field(n).Name
		if u.Type().Field(n).Type.Kind() != reflect.Uint64 {
			t.Errorf("Stats.%s is %s, want uint64", name, u.Type().Field(n).Type)
		}
		if got, want := u.Field(n).Uint(), i.FieldByName(name).Int(); got != uint64(want) {
			t.Errorf("%s: Counters %d, Stats %d", name, got, want)
		}
	}
	if s := c.Counters(); s.PullsOK != 1 || s.BytesPulled != uint64(len(body)) {
		t.Errorf("after one pull: PullsOK %d BytesPulled %d", s.PullsOK, s.BytesPulled)
	}
}
