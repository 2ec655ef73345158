package etcdstoretest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/bettercompute/siteboot/internal/testpeer"
)

// dataDir is a temporary directory, on /dev/shm when there is one: etcd fsyncs every
// write, and a test wants the protocol, not the disk.
func dataDir(t testing.TB) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "lease-etcd-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// Peer is a running etcd.
type Peer struct {
	Endpoint string // http://127.0.0.1:PORT
	Client   *clientv3.Client
}

// NewClient returns another client of the peer, closed at cleanup.
func (p *Peer) NewClient(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint}, DialTimeout: 10 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Start starts an etcd and returns it with a client connected, closed at cleanup.
func Start(t testing.TB) *Peer {
	t.Helper()
	bin := testpeer.LookPath(t, "etcd", "etcd-server")
	client := testpeer.FreePort(t, "tcp")
	peer := testpeer.FreePort(t, "tcp")
	curl := fmt.Sprintf("http://127.0.0.1:%d", client)
	purl := fmt.Sprintf("http://127.0.0.1:%d", peer)
	p := testpeer.Start(t, testpeer.Cmd{
		Path: bin,
		Args: []string{
			"--name", "lease-test",
			"--data-dir", dataDir(t),
			"--listen-client-urls", curl, "--advertise-client-urls", curl,
			"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
			"--initial-cluster", "lease-test=" + purl,
			"--logger", "zap", "--log-level", "warn",
		},
		ReadyTCP: fmt.Sprintf("127.0.0.1:%d", client),
	})
	t.Logf("etcd: Debian etcd-server (%s), pid %d, client %s", bin, p.PID(), curl)
	peerInfo := &Peer{Endpoint: curl}
	c := peerInfo.NewClient(t)
	peerInfo.Client = c
	// The port accepts before the server is ready to serve: wait for a first answer.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		if _, err := c.Get(ctx, "/ready"); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("etcd not answering: %v\n%s", err, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return peerInfo
}
