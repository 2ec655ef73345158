package imagecache

import "sync/atomic"

// Stats are the cache's counters since Open, for a host to export.
type Stats struct {
	PullsStarted        int64 // pulls that began transferring
	PullsOK             int64 // images verified and cached
	PullsFailed         int64 // pulls that ended in a failure
	BytesPulled         int64 // bytes received from sources
	Evictions           int64 // images trimmed under the budget
	EvictedBytes        int64
	TempFilesRemoved    int64 // leftovers of interrupted writes removed by Open
	PartialsTrimmed     int64 // partial copies of failed pulls removed to keep the budget
	PartialBytesTrimmed int64
	CorruptFilesRemoved int64 // files whose bytes did not match their name, removed after Open
	StampMatched        int64 // images served at Open on their verification stamp
	Reverified          int64 // images hashed again after Open and found good
	ResumedPulls        int64 // pulls that continued a partial copy left by an earlier process
	ResumedBytes        int64 // bytes those partial copies held (not downloaded again)
	Preemptions         int64 // attempts that gave their slot to a pull of higher priority
	Yields              int64 // attempts that gave their slot, after a rate window, to a pull of equal priority
	SourceRefused       int64 // pulls refused by the source policy
	GrantsIssued        int64
	Served              int64 // requests answered with an image (200, 206, 304, HEAD), and images opened by OpenGranted
	ServedBytes         int64 // body bytes of the HTTP answers (what is sent from a File, its sender counts: tftpd.Transfer.Bytes)

	// Requests refused, by reason, over HTTP and by OpenGranted alike. All but RefusedFenced
	// and RefusedRanges answer the same 404.
	RefusedPath    int64 // not GET/HEAD /cache/t/GRANT/SHA256 (OpenGranted, GrantFS: a malformed grant or name)
	RefusedGrant   int64 // unknown grant
	RefusedExpired int64 // expired grant
	RefusedDigest  int64 // a grant for another digest
	RefusedMissing int64 // the image is not cached
	RefusedFenced  int64 // a boot grant while the fence is inactive (503)
	RefusedRanges  int64 // more than MaxRanges byte ranges once merged (416)
}

type counters struct {
	pullsStarted, pullsOK, pullsFailed, bytesPulled atomic.Int64
	evictions, evictedBytes                         atomic.Int64
	tempRemoved, corruptRemoved                     atomic.Int64
	partialsTrimmed, partialBytesTrimmed            atomic.Int64
	stampMatched, reverified                        atomic.Int64
	resumedPulls, resumedBytes, preemptions         atomic.Int64
	sourceRefused, yields                           atomic.Int64
	grantsIssued, served, servedBytes               atomic.Int64
	refusedPath, refusedGrant, refusedExpired       atomic.Int64
	refusedDigest, refusedMissing, refusedFenced    atomic.Int64
	refusedRanges                                   atomic.Int64
}

// Stats returns a snapshot of the counters.
func (c *Cache) Stats() Stats {
	s := &c.stats
	return Stats{
		PullsStarted: s.pullsStarted.Load(), PullsOK: s.pullsOK.Load(), PullsFailed: s.pullsFailed.Load(),
		BytesPulled: s.bytesPulled.Load(), Evictions: s.evictions.Load(), EvictedBytes: s.evictedBytes.Load(),
		TempFilesRemoved: s.tempRemoved.Load(), CorruptFilesRemoved: s.corruptRemoved.Load(),
		PartialsTrimmed: s.partialsTrimmed.Load(), PartialBytesTrimmed: s.partialBytesTrimmed.Load(),
		StampMatched: s.stampMatched.Load(), Reverified: s.reverified.Load(),
		ResumedPulls: s.resumedPulls.Load(), ResumedBytes: s.resumedBytes.Load(),
		Preemptions: s.preemptions.Load(), Yields: s.yields.Load(), SourceRefused: s.sourceRefused.Load(),
		GrantsIssued: s.grantsIssued.Load(), Served: s.served.Load(), ServedBytes: s.servedBytes.Load(),
		RefusedPath: s.refusedPath.Load(), RefusedGrant: s.refusedGrant.Load(), RefusedExpired: s.refusedExpired.Load(),
		RefusedDigest: s.refusedDigest.Load(), RefusedMissing: s.refusedMissing.Load(), RefusedFenced: s.refusedFenced.Load(),
		RefusedRanges: s.refusedRanges.Load(),
	}
}
