package ipxe_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/bettercompute/siteboot/ipxe"
)

// BenchmarkRenderBoot renders the machine's boot script alone (four attempts, a realistic
// command line with a 200-byte assertion).
func BenchmarkRenderBoot(b *testing.B) {
	boot := sampleBoot
	boot.Retry = ipxe.Retry{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := boot.Render(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "scripts/s")
}

// ed25519Signer signs a compact binary encoding of the claims with Ed25519, the way package
// assertion does, so each script costs one real signature.
func ed25519Signer() ipxe.Signer {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	return ipxe.SignerFunc(func(_ context.Context, c ipxe.Claims) (string, error) {
		msg := make([]byte, 0, 160)
		msg = append(msg, "discovery-assertion\x00site_01k5w\x00node_01k5w\x00"...)
		msg = binary.BigEndian.AppendUint64(msg, c.Epoch)
		msg = append(msg, c.MAC[:]...)
		msg = append(msg, c.UUID[:]...)
		ip := c.IP.As16()
		msg = append(msg, ip[:]...)
		msg = append(msg, c.Workflow...)
		msg = binary.BigEndian.AppendUint64(msg, uint64(c.NotAfter.Unix()))
		sig := ed25519.Sign(key, msg)
		out := make([]byte, 0, len(msg)+len(sig))
		return base64.RawURLEncoding.EncodeToString(append(append(out, msg...), sig...)), nil
	})
}

// BenchmarkServeBootSigned is GET /boot/ipxe end to end in the handler: query parsing, fence,
// entry, cached token, bc.cache, one Ed25519 signature, render, write.
func BenchmarkServeBootSigned(b *testing.B) {
	host := newFakeHost()
	cfg := host.config()
	cfg.Signer = ed25519Signer()
	h, err := ipxe.NewHandler(cfg)
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, bootPath(mac1, uuid1, "192.0.2.50"), nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "scripts/s")
}

// BenchmarkServeBootSignedHTTP is the same over a loopback HTTP/1.1 connection with
// keep-alive, as iPXE fetches it.
func BenchmarkServeBootSignedHTTP(b *testing.B) {
	host := newFakeHost()
	cfg := host.config()
	cfg.Signer = ed25519Signer()
	h, err := ipxe.NewHandler(cfg)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(ipxe.NewServer(h).Handler)
	defer srv.Close()
	url := srv.URL + bootPath(mac1, uuid1, "192.0.2.50")
	client := srv.Client()
	buf := make([]byte, 8<<10)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "scripts/s")
}
