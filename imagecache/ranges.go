package imagecache

import (
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// MaxRanges is the most byte ranges a request is served after overlapping and nearby
// ranges are merged; a request with more is answered 416 (Range Not Satisfiable), as RFC
// 9110 section 14.2 allows for a set of many small ranges.
const MaxRanges = 16

// rangeMergeGap is the largest gap between two requested ranges that are merged into one:
// about the headers a multipart response spends on a part, so that merging never sends
// more than the parts would have.
const rangeMergeGap = 128

// byteRange is [start, end) of a file.
type byteRange struct{ start, end int64 }

// limitRanges rewrites r's Range header, for a file of size bytes, to its ranges sorted,
// with overlapping, adjacent and nearby ones (rangeMergeGap) merged, so that a grant holder
// cannot have a part of the file sent many times over in one response (a multipart answer
// to "0-1023,0-1023,..." sends every copy, each with its part headers). It reports false
// when more than MaxRanges remain: the caller answers 416. A header it cannot read, or
// whose ranges all lie past the end, is left for http.ServeContent to answer (416).
func limitRanges(r *http.Request, size int64) bool {
	h := r.Header.Get("Range")
	if h == "" {
		return true
	}
	ranges, ok := parseRanges(h, size)
	if !ok || len(ranges) == 0 {
		return true
	}
	slices.SortFunc(ranges, func(a, b byteRange) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	merged := ranges[:1]
	for _, br := range ranges[1:] {
		last := &merged[len(merged)-1]
		if br.start <= last.end+rangeMergeGap {
			last.end = max(last.end, br.end)
			continue
		}
		merged = append(merged, br)
	}
	if len(merged) > MaxRanges {
		return false
	}
	var b strings.Builder
	b.WriteString("bytes=")
	for i, br := range merged {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(br.start, 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatInt(br.end-1, 10))
	}
	r.Header.Set("Range", b.String())
	return true
}

// parseRanges reads a Range header as net/http does, resolved against size; ranges that
// start past the end are left out (net/http ignores them too). ok is false for a header
// that does not parse.
func parseRanges(s string, size int64) ([]byteRange, bool) {
	const prefix = "bytes="
	if !strings.HasPrefix(s, prefix) {
		return nil, false
	}
	var out []byteRange
	for ra := range strings.SplitSeq(s[len(prefix):], ",") {
		ra = textproto.TrimString(ra)
		if ra == "" {
			continue
		}
		startStr, endStr, ok := strings.Cut(ra, "-")
		if !ok {
			return nil, false
		}
		startStr, endStr = textproto.TrimString(startStr), textproto.TrimString(endStr)
		var br byteRange
		if startStr == "" {
			// A suffix: the last endStr bytes.
			if endStr == "" || endStr[0] == '-' {
				return nil, false
			}
			n, err := strconv.ParseInt(endStr, 10, 64)
			if err != nil || n < 0 {
				return nil, false
			}
			br = byteRange{start: max(size-n, 0), end: size}
		} else {
			i, err := strconv.ParseInt(startStr, 10, 64)
			if err != nil || i < 0 {
				return nil, false
			}
			if i >= size {
				continue // past the end: net/http skips it
			}
			br = byteRange{start: i, end: size}
			if endStr != "" {
				j, err := strconv.ParseInt(endStr, 10, 64)
				if err != nil || i > j {
					return nil, false
				}
				br.end = min(j, size-1) + 1
			}
		}
		if br.start < br.end {
			out = append(out, br)
		}
	}
	return out, true
}
