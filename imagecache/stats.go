package imagecache

import "sync/atomic"

// Stats are the cache's counters since Open, for a host to export.
type Stats struct {
	PullsStarted        uint64 // pulls that began transferring
	PullsOK             uint64 // images verified and cached
	PullsFailed         uint64 // pulls that ended in a failure
	BytesPulled         uint64 // bytes received from sources
	Evictions           uint64 // images trimmed under the budget
	EvictedBytes        uint64
	TempFilesRemoved    uint64 // leftovers of interrupted writes removed by Open
	PartialsTrimmed     uint64 // partial copies of failed pulls removed to keep the budget
	PartialBytesTrimmed uint64
	CorruptFilesRemoved uint64 // files whose bytes did not match their name, removed after Open
	StampMatched        uint64 // images served at Open on their verification stamp
	Reverified          uint64 // images hashed again after Open and found good
	ResumedPulls        uint64 // pulls that continued a partial copy left by an earlier process
	ResumedBytes        uint64 // bytes those partial copies held (not downloaded again)
	Preemptions         uint64 // attempts that gave their slot to a pull of higher priority
	Yields              uint64 // attempts that gave their slot, after a rate window, to a pull of equal priority
	SourceRefused       uint64 // pulls refused by the source policy
	GrantsIssued        uint64
	Served              uint64 // requests answered with an image (200, 206, 304, HEAD), and images opened by OpenGranted
	ServedBytes         uint64 // body bytes of the HTTP answers (what is sent from a File, its sender counts: tftpd.Transfer.Bytes)

	// Requests refused, by reason, over HTTP and by OpenGranted alike. All but RefusedFenced
	// and RefusedRanges answer the same 404.
	RefusedPath    uint64 // not GET/HEAD /cache/t/GRANT/SHA256 (OpenGranted, GrantFS: a malformed grant or name)
	RefusedGrant   uint64 // unknown grant
	RefusedExpired uint64 // expired grant
	RefusedDigest  uint64 // a grant for another digest
	RefusedMissing uint64 // the image is not cached
	RefusedFenced  uint64 // a boot grant while the fence is inactive (503)
	RefusedRanges  uint64 // more than MaxRanges byte ranges once merged (416)
}

// StatsInt64 is [Stats] in int64 counters, what [Cache.Stats] returns.
//
// Deprecated: use Stats, from [Cache.Counters].
type StatsInt64 struct {
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

// Counters returns a snapshot of the counters.
func (c *Cache) Counters() Stats {
	s := &c.stats
	return Stats{
		PullsStarted: uint64(max(s.pullsStarted.Load(), 0)), PullsOK: uint64(max(s.pullsOK.Load(), 0)), PullsFailed: uint64(max(s.pullsFailed.Load(), 0)),
		BytesPulled: uint64(max(s.bytesPulled.Load(), 0)), Evictions: uint64(max(s.evictions.Load(), 0)), EvictedBytes: uint64(max(s.evictedBytes.Load(), 0)),
		TempFilesRemoved: uint64(max(s.tempRemoved.Load(), 0)), CorruptFilesRemoved: uint64(max(s.corruptRemoved.Load(), 0)),
		PartialsTrimmed: uint64(max(s.partialsTrimmed.Load(), 0)), PartialBytesTrimmed: uint64(max(s.partialBytesTrimmed.Load(), 0)),
		StampMatched: uint64(max(s.stampMatched.Load(), 0)), Reverified: uint64(max(s.reverified.Load(), 0)),
		ResumedPulls: uint64(max(s.resumedPulls.Load(), 0)), ResumedBytes: uint64(max(s.resumedBytes.Load(), 0)),
		Preemptions: uint64(max(s.preemptions.Load(), 0)), Yields: uint64(max(s.yields.Load(), 0)), SourceRefused: uint64(max(s.sourceRefused.Load(), 0)),
		GrantsIssued: uint64(max(s.grantsIssued.Load(), 0)), Served: uint64(max(s.served.Load(), 0)), ServedBytes: uint64(max(s.servedBytes.Load(), 0)),
		RefusedPath: uint64(max(s.refusedPath.Load(), 0)), RefusedGrant: uint64(max(s.refusedGrant.Load(), 0)), RefusedExpired: uint64(max(s.refusedExpired.Load(), 0)),
		RefusedDigest: uint64(max(s.refusedDigest.Load(), 0)), RefusedMissing: uint64(max(s.refusedMissing.Load(), 0)), RefusedFenced: uint64(max(s.refusedFenced.Load(), 0)),
		RefusedRanges: uint64(max(s.refusedRanges.Load(), 0)),
	}
}

// Stats returns a snapshot of the counters in int64.
//
// Deprecated: use Counters. Once no caller reads int64 counters, Stats will return
// [Stats] and Counters will be deprecated in its favour.
func (c *Cache) Stats() StatsInt64 {
	s := &c.stats
	return StatsInt64{
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
