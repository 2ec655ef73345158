package assertion_test

import (
	"context"
	"crypto/ed25519"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/assertion"
)

// The benchmarks compare Issue and Verify with bare ed25519.Sign and ed25519.Verify over a
// message of the same size, in the same run:
//
//	go test -run '^$' -bench 'Sign|Verify' -benchtime 2s ./assertion/

func BenchmarkSign(b *testing.B) {
	s := newSite(b)
	payload, _ := s.assertionFor().MarshalBinary()
	msg := append([]byte("siteboot/discovery-assertion\x00"), payload...)
	b.Run("ed25519.Sign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ed25519.Sign(s.keyA1, msg)
		}
	})
	b.Run("Issuer.Issue", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			if _, err := s.issuer.Issue(ctx, s.fields); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	s := newSite(b)
	payload, _ := s.assertionFor().MarshalBinary()
	msg := append([]byte("siteboot/discovery-assertion\x00"), payload...)
	sig := ed25519.Sign(s.keyA1, msg)
	pub := s.keyA1.Public().(ed25519.PublicKey)
	b.Run("ed25519.Verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !ed25519.Verify(pub, msg, sig) {
				b.Fatal("does not verify")
			}
		}
	})
	// Every Verify is a full admission (resolver, lease, MAC, UUID, replay cache insert), so
	// each iteration needs an assertion of its own: they differ in the IP and are signed
	// before the timer starts.
	b.Run("Verifier.Verify", func(b *testing.B) {
		b.ReportAllocs()
		texts := freshTexts(b, s, pool)
		ctx := context.Background()
		s.verifier.Replay = &assertion.MemoryReplayCache{}
		i := 0
		for b.Loop() {
			if i == pool {
				// Out of fresh texts: start again with an empty replay cache (untimed).
				b.StopTimer()
				s.verifier.Replay = &assertion.MemoryReplayCache{}
				i = 0
				b.StartTimer()
			}
			if _, err := s.verifier.Verify(ctx, texts[i], s.join); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

const pool = 1 << 15

// freshTexts issues n assertions that differ in their IP.
func freshTexts(b *testing.B, s *site, n int) []string {
	texts := make([]string, 0, n)
	for i := range n {
		f := s.fields
		f.IP = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		text, err := s.issuer.Issue(context.Background(), f)
		if err != nil {
			b.Fatal(err)
		}
		texts = append(texts, text)
	}
	return texts
}

// BenchmarkRatio interleaves each package call with its bare ed25519 counterpart in the same
// iteration and times both by the CPU time of the benchmark's own thread, so that other
// processes competing for the CPU do not count; it reports the mean of each and their ratio:
//
//	go test -run '^$' -bench Ratio -benchtime 20000x ./assertion/
func BenchmarkRatio(b *testing.B) {
	s := newSite(b)
	payload, _ := s.assertionFor().MarshalBinary()
	msg := append([]byte("siteboot/discovery-assertion\x00"), payload...)
	sig := ed25519.Sign(s.keyA1, msg)
	pub := s.keyA1.Public().(ed25519.PublicKey)
	ctx := context.Background()
	b.Run("sign", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var bare, ours time.Duration
		for b.Loop() {
			t := threadCPU()
			ed25519.Sign(s.keyA1, msg)
			t1 := threadCPU()
			if _, err := s.issuer.Issue(ctx, s.fields); err != nil {
				b.Fatal(err)
			}
			t2 := threadCPU()
			bare, ours = bare+t1-t, ours+t2-t1
		}
		report(b, bare, ours)
	})
	b.Run("verify", func(b *testing.B) {
		texts := freshTexts(b, s, pool)
		s.verifier.Replay = &assertion.MemoryReplayCache{}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var bare, ours time.Duration
		i := 0
		for b.Loop() {
			if i == pool {
				s.verifier.Replay = &assertion.MemoryReplayCache{}
				i = 0
			}
			t := threadCPU()
			if !ed25519.Verify(pub, msg, sig) {
				b.Fatal("does not verify")
			}
			t1 := threadCPU()
			if _, err := s.verifier.Verify(ctx, texts[i], s.join); err != nil {
				b.Fatal(err)
			}
			t2 := threadCPU()
			bare, ours = bare+t1-t, ours+t2-t1
			i++
		}
		report(b, bare, ours)
	})
}

func report(b *testing.B, bare, ours time.Duration) {
	n := float64(b.N)
	b.ReportMetric(float64(bare.Nanoseconds())/n, "bare-cpu-ns/op")
	b.ReportMetric(float64(ours.Nanoseconds())/n, "ours-cpu-ns/op")
	b.ReportMetric(float64(ours)/float64(bare), "ratio")
}

// BenchmarkReplayCache measures Use on a cache already holding 1e6 live entries, and reports
// the heap per entry.
func BenchmarkReplayCache(b *testing.B) {
	const n = 1_000_000
	perEntry, _ := replayMemory(b, n)
	c := &assertion.MemoryReplayCache{MaxEntries: 2 * n}
	ctx := context.Background()
	for i := range uint64(n) {
		c.Use(ctx, rid(i), t0, t0.Add(assertion.MaxLifetime))
	}
	b.ResetTimer()
	i := uint64(n)
	for b.Loop() {
		if first, err := c.Use(ctx, rid(i), t0, t0.Add(assertion.MaxLifetime)); !first || err != nil {
			b.Fatal(first, err)
		}
		i++
		if i == 2*n {
			b.StopTimer()
			c = &assertion.MemoryReplayCache{MaxEntries: 2 * n}
			i = 0
			b.StartTimer()
		}
	}
	b.ReportMetric(perEntry, "heap-bytes/entry@1e6")
}

// BenchmarkIssueOverhead is Issue with a signer that does no cryptography: what the package
// adds to a signature (validation, encoding, the purpose prefix, base64).
func BenchmarkIssueOverhead(b *testing.B) {
	s := newSite(b)
	s.issuer.Signer = failingSigner{pub: s.keyA1.Public(), sig: make([]byte, ed25519.SignatureSize)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.issuer.Issue(ctx, s.fields); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode is the parsing part of Verify.
func BenchmarkDecode(b *testing.B) {
	s := newSite(b)
	text := s.issue(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := assertion.Decode(text); err != nil {
			b.Fatal(err)
		}
	}
}
