package imagecache

import "github.com/bettercompute/siteboot/metric"

var (
	famServed      = metric.Family{Name: "cache_served_total", Help: "Cache requests answered with an image."}
	famServedBytes = metric.Family{Name: "cache_served_bytes_total", Help: "Body bytes served from the cache."}
	famRefused     = metric.Family{Name: "cache_refused_total", Help: "Cache requests refused, by reason.", Labels: []string{"reason"}}
	famGrants      = metric.Family{Name: "cache_grants_issued_total", Help: "Cache grants issued."}
	famPulls       = metric.Family{Name: "cache_pulls_total", Help: "Cache pulls by result.", Labels: []string{"result"}}
)

// Samples lists the counters of serving and pulling under the names of package metric's
// convention: cache_served_total, cache_served_bytes_total, cache_refused_total{reason}
// (path, grant, expired, digest, missing, fenced), cache_grants_issued_total and
// cache_pulls_total{result} (ok, failed).
func (s Stats) Samples() []metric.Sample {
	return []metric.Sample{
		famServed.Sample(s.Served), famServedBytes.Sample(s.ServedBytes),
		famRefused.Sample(s.RefusedPath, "path"), famRefused.Sample(s.RefusedGrant, "grant"),
		famRefused.Sample(s.RefusedExpired, "expired"), famRefused.Sample(s.RefusedDigest, "digest"),
		famRefused.Sample(s.RefusedMissing, "missing"), famRefused.Sample(s.RefusedFenced, "fenced"),
		famGrants.Sample(s.GrantsIssued),
		famPulls.Sample(s.PullsOK, "ok"), famPulls.Sample(s.PullsFailed, "failed"),
	}
}
