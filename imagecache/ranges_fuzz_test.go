package imagecache

import (
	"net/http"
	"testing"
)

// A Range header is network input from a grant holder: limitRanges rewrites it to at most
// MaxRanges sorted ranges inside the file, apart by more than rangeMergeGap, that cover
// every byte the header asked for and no more than the gaps it merged; a header it refuses
// asks for more than MaxRanges distant ranges.
func FuzzLimitRanges(f *testing.F) {
	for _, s := range []string{"bytes=0-63,0-63,0-63", "bytes=500-599,0-99,50-549", "bytes=-100", "bytes=69000-,-2000",
		"bytes=0-0,1000-1000,2000-2000", "bytes=abc", "bytes=5-4", "bytes=,,0-1,", "bytes=99999-", "bytes=-0"} {
		f.Add(s, int64(70000))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size <= 0 || size > 1<<40 {
			return
		}
		asked, parsed := parseRanges(h, size)
		r := &http.Request{Header: http.Header{"Range": {h}}}
		ok := limitRanges(r, size)
		got := r.Header.Get("Range")
		if !parsed || len(asked) == 0 {
			if !ok || got != h {
				t.Fatalf("a header it does not read (%q) was changed to %q or refused", h, got)
			}
			return
		}
		if !ok {
			if len(asked) <= MaxRanges {
				t.Fatalf("%q refused with %d ranges", h, len(asked))
			}
			return
		}
		merged, ok2 := parseRanges(got, size)
		if !ok2 || len(merged) == 0 || len(merged) > MaxRanges {
			t.Fatalf("%q rewritten to %q", h, got)
		}
		var sum int64
		for i, m := range merged {
			if m.start < 0 || m.end > size || m.start >= m.end {
				t.Fatalf("%q: range %v outside the file of %d", got, m, size)
			}
			if i > 0 && m.start <= merged[i-1].end+rangeMergeGap {
				t.Fatalf("%q: ranges %v and %v not merged", got, merged[i-1], m)
			}
			sum += m.end - m.start
		}
		covered := func(p int64) bool {
			for _, m := range merged {
				if m.start <= p && p < m.end {
					return true
				}
			}
			return false
		}
		var askedMax int64
		for _, a := range asked {
			if !covered(a.start) || !covered(a.end-1) {
				t.Fatalf("%q: %v asked, not in %q", h, a, got)
			}
			askedMax = max(askedMax, a.end-a.start)
		}
		if sum > size || (len(merged) == len(asked) && sum > int64(len(asked))*askedMax) {
			t.Fatalf("%q: %d bytes in %q", h, sum, got)
		}
	})
}
