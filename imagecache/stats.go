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
	Served              uint64 // images opened under a grant, over HTTP or by OpenGranted; an HTTP request refused 416 for too many ranges is taken back out, other answers of http.ServeContent (e.g. 412) are not
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
