package lease_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/lease"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []lease.Record{
		{Site: "site_01k5w", Holder: "node_01", Epoch: 7, Expires: t0.Add(15 * time.Second), TTL: 15 * time.Second, Beat: 1 << 62},
		{Site: "s", Epoch: 8, TTL: 15 * time.Second},
		{Site: "s", Holder: "n", Epoch: 1, Expires: time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600)), TTL: time.Millisecond},
	} {
		b, err := lease.EncodeRecord(r)
		if err != nil {
			t.Fatalf("encode %+v: %v", r, err)
		}
		got, err := lease.ParseRecord(b)
		if err != nil {
			t.Fatalf("parse %s: %v", b, err)
		}
		if diff := cmp.Diff(r, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("round trip of %s (-want +got):\n%s", b, diff)
		}
	}
}

func TestParseRecordRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"empty":             ``,
		"not json":          `site`,
		"unknown version":   `{"v":2,"site":"s","epoch":1,"ttl_ms":15000}`,
		"unknown field":     `{"v":1,"site":"s","epoch":1,"ttl_ms":15000,"x":1}`,
		"trailing":          `{"v":1,"site":"s","epoch":1,"ttl_ms":15000}{}`,
		"no site":           `{"v":1,"epoch":1,"ttl_ms":15000}`,
		"site with space":   `{"v":1,"site":"a b","epoch":1,"ttl_ms":15000}`,
		"zero ttl":          `{"v":1,"site":"s","epoch":1,"ttl_ms":0}`,
		"huge ttl":          `{"v":1,"site":"s","epoch":1,"ttl_ms":3600001}`,
		"holder at epoch 0": `{"v":1,"site":"s","holder":"a","epoch":0,"expires":"2026-03-01T12:00:00Z","ttl_ms":15000}`,
		"holder no expiry":  `{"v":1,"site":"s","holder":"a","epoch":1,"ttl_ms":15000}`,
		"expiry no holder":  `{"v":1,"site":"s","epoch":1,"expires":"2026-03-01T12:00:00Z","ttl_ms":15000}`,
		"bad expiry":        `{"v":1,"site":"s","holder":"a","epoch":1,"expires":"tomorrow","ttl_ms":15000}`,
		"negative epoch":    `{"v":1,"site":"s","epoch":-1,"ttl_ms":15000}`,
		"oversized":         `{"v":1,"site":"` + string(make([]byte, lease.MaxRecordSize)) + `"}`,
	} {
		if r, err := lease.ParseRecord([]byte(in)); !errors.Is(err, lease.ErrBadRecord) {
			t.Errorf("%s: ParseRecord = %+v, %v; want ErrBadRecord", name, r, err)
		}
	}
	if _, err := lease.EncodeRecord(lease.Record{Site: "s"}); !errors.Is(err, lease.ErrBadRecord) {
		t.Errorf("EncodeRecord of a record without TTL: %v, want ErrBadRecord", err)
	}
}

// FuzzParseRecord: no input panics, and whatever parses encodes to bytes that parse to the
// same record.
func FuzzParseRecord(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "record-*.json"))
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"v":1,"site":"s","epoch":3,"ttl_ms":15000}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := lease.ParseRecord(b)
		if err != nil {
			if !errors.Is(err, lease.ErrBadRecord) {
				t.Fatalf("error %v does not match ErrBadRecord", err)
			}
			return
		}
		enc, err := lease.EncodeRecord(r)
		if err != nil {
			t.Fatalf("parsed %+v does not encode: %v", r, err)
		}
		r2, err := lease.ParseRecord(enc)
		if err != nil {
			t.Fatalf("re-encoded %s does not parse: %v", enc, err)
		}
		if !r.Expires.Equal(r2.Expires) {
			t.Fatalf("expiry changed: %v -> %v", r.Expires, r2.Expires)
		}
		r.Expires, r2.Expires = time.Time{}, time.Time{}
		if r != r2 {
			t.Fatalf("round trip changed the record: %+v -> %+v", r, r2)
		}
	})
}
