package lease

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Limits of a stored record.
const (
	// MaxRecordSize is the largest encoded record ParseRecord accepts.
	MaxRecordSize = 4096
	// MaxIDLen is the longest site or node id a record may hold.
	MaxIDLen = 256
	// MaxTTL is the longest TTL a record may hold.
	MaxTTL = time.Hour
)

// recordJSON is the stored form: versioned, times in RFC 3339 UTC, TTL in milliseconds.
type recordJSON struct {
	V       int    `json:"v"`
	Site    string `json:"site"`
	Holder  string `json:"holder,omitempty"`
	Epoch   uint64 `json:"epoch"`
	Expires string `json:"expires,omitempty"`
	TTLms   int64  `json:"ttl_ms"`
	Beat    uint64 `json:"beat,omitempty"`
}

// EncodeRecord returns the record's stored form (JSON), for stores that keep bytes.
func EncodeRecord(r Record) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	j := recordJSON{V: 1, Site: r.Site, Holder: r.Holder, Epoch: r.Epoch,
		TTLms: r.TTL.Milliseconds(), Beat: r.Beat}
	if !r.Expires.IsZero() {
		j.Expires = r.Expires.UTC().Format(time.RFC3339Nano)
	}
	return json.Marshal(j)
}

// ParseRecord parses a record's stored form. Anything malformed, oversized, of an unknown
// version or not valid is an error matching ErrBadRecord.
func ParseRecord(b []byte) (Record, error) {
	if len(b) > MaxRecordSize {
		return Record{}, fmt.Errorf("%w: %d bytes", ErrBadRecord, len(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var j recordJSON
	if err := dec.Decode(&j); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrBadRecord, err)
	}
	if dec.More() {
		return Record{}, fmt.Errorf("%w: trailing data", ErrBadRecord)
	}
	if j.V != 1 {
		return Record{}, fmt.Errorf("%w: version %d", ErrBadRecord, j.V)
	}
	if j.TTLms <= 0 || j.TTLms > MaxTTL.Milliseconds() {
		return Record{}, fmt.Errorf("%w: ttl %d ms", ErrBadRecord, j.TTLms)
	}
	r := Record{Site: j.Site, Holder: j.Holder, Epoch: j.Epoch,
		TTL: time.Duration(j.TTLms) * time.Millisecond, Beat: j.Beat}
	if j.Expires != "" {
		t, err := time.Parse(time.RFC3339Nano, j.Expires)
		if err != nil {
			return Record{}, fmt.Errorf("%w: expires: %w", ErrBadRecord, err)
		}
		r.Expires = t.UTC()
	}
	if err := r.validate(); err != nil {
		return Record{}, err
	}
	return r, nil
}

func (r Record) validate() error {
	if err := validID("site", r.Site); err != nil {
		return err
	}
	if r.TTL <= 0 || r.TTL > MaxTTL || r.TTL%time.Millisecond != 0 {
		return fmt.Errorf("%w: ttl %v", ErrBadRecord, r.TTL)
	}
	if r.Holder == "" {
		if !r.Expires.IsZero() || r.Beat != 0 {
			return fmt.Errorf("%w: expiry or beat without a holder", ErrBadRecord)
		}
		return nil
	}
	if err := validID("holder", r.Holder); err != nil {
		return err
	}
	if r.Epoch == 0 {
		return fmt.Errorf("%w: holder at epoch 0", ErrBadRecord)
	}
	if r.Expires.IsZero() {
		return fmt.Errorf("%w: holder without expiry", ErrBadRecord)
	}
	if y := r.Expires.Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%w: expiry year %d", ErrBadRecord, y)
	}
	return nil
}

func validID(what, s string) error {
	if s == "" || len(s) > MaxIDLen || !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s %q", ErrBadRecord, what, truncate(s))
	}
	for _, c := range s {
		if c < 0x21 || c == 0x7f {
			return fmt.Errorf("%w: %s %q", ErrBadRecord, what, truncate(s))
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}
