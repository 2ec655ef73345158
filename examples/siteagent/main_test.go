package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
)

// buildAgent builds the siteagent binary once per test.
func buildAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "siteagent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestCheck(t *testing.T) {
	bin := buildAgent(t)
	out, err := exec.Command(bin, "-check", "testdata/example.toml").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "config ok" {
		t.Errorf("-check example.toml: %v, %q", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.toml")
	b, _ := os.ReadFile("testdata/example.toml")
	os.WriteFile(bad, []byte(strings.Replace(string(b), `ttl = "15s"`, "ttl = \"15s\"\ngrace = \"1s\"", 1)), 0o644)
	out, err = exec.Command(bin, "-check", bad).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "lease.grace") {
		t.Errorf("-check with an unknown key: %v, %q; want exit 1 naming lease.grace", err, out)
	}
	// A plain http control URL without insecure = true.
	os.WriteFile(bad, []byte(strings.Replace(string(b), `url       = "https://`, `url       = "http://`, 1)), 0o644)
	out, err = exec.Command(bin, "-check", bad).CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "control.url: plain http") {
		t.Errorf("-check with an http control URL: %v, %q; want exit 1 naming control.url", err, out)
	}
	// A data_dir that names a regular file: the start would fail.
	file := filepath.Join(t.TempDir(), "not-a-dir")
	os.WriteFile(file, []byte("x"), 0o600)
	os.WriteFile(bad, []byte(strings.Replace(string(b), `data_dir = "/var/lib/siteagent"`, `data_dir = "`+file+`"`, 1)), 0o644)
	out, err = exec.Command(bin, "-check", bad).CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "data_dir") {
		t.Errorf("-check with data_dir naming a file: %v, %q; want exit 1 naming data_dir", err, out)
	}
	// A heartbeat allowed to wait longer than the lease lives.
	os.WriteFile(bad, []byte(strings.Replace(string(b), `timeout   = "4s"`, `timeout   = "20s"`, 1)), 0o644)
	out, err = exec.Command(bin, "-check", bad).CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "control.timeout") {
		t.Errorf("-check with control.timeout over lease.ttl: %v, %q; want exit 1 naming control.timeout", err, out)
	}
}

// TestSIGTERMDrains starts the agent with no control plane reachable (it keeps running,
// fenced), checks its health endpoint, and stops it with SIGTERM: it exits 0, promptly.
func TestSIGTERMDrains(t *testing.T) {
	bin := buildAgent(t)
	dir := t.TempDir()
	metrics := fmt.Sprintf("127.0.0.1:%d", testpeer.FreePort(t, "tcp"))
	cfg := fencedConfig(dir, "127.0.0.1:0", metrics)
	path := filepath.Join(dir, "agent.toml")
	os.WriteFile(path, []byte(cfg), 0o644)
	p := testpeer.Start(t, testpeer.Cmd{Path: bin, Args: []string{"-config", path}, ReadyTCP: metrics})
	resp, err := http.Get("http://" + metrics + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/healthz without a control plane: %d, want 503", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "node.key")); err != nil {
		t.Errorf("node key not created: %v", err)
	}
	start := time.Now()
	syscall.Kill(p.PID(), syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10 s after SIGTERM\n%s", p.Output())
	}
	if err := p.Err(); err != nil {
		t.Errorf("exit after SIGTERM: %v, want status 0", err)
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("took %v to drain", d)
	}
	if !strings.Contains(p.Output(), "site agent stopped") {
		t.Errorf("no clean stop in the log:\n%s", p.Output())
	}
	if !strings.Contains(p.Output(), "level=WARN msg=\"control link is plain http") {
		t.Errorf("no warning at start about the plain http link:\n%s", p.Output())
	}
}

// fencedConfig is an agent's config with proxy DHCP on loopback (port 4011 at pxe), metrics
// at metrics, and a control plane nobody answers: the agent runs, fenced.
func fencedConfig(dir, pxe, metrics string) string {
	return fmt.Sprintf(`
site_id = "site-t"
node_id = "agent-t"
data_dir = %q
[boot]
proxy_dhcp = true
dhcp_listen = "127.0.0.1:0"
pxe_listen = %q
server_ip = "127.0.0.1"
http_listen = "127.0.0.1:0"
[boot.kernel]
url = "http://127.0.0.1:9/vmlinuz"
sha256 = "5fac891e7346c6a6820ab4ff0de1954eb4ba76de1f034545d8bcaf128bdbe80f"
[boot.initrd]
url = "http://127.0.0.1:9/initrd"
sha256 = "0128042d64cad309383b4779ec4290792b54daa97158e4c6126a57d2260042fe"
[control]
url = "http://127.0.0.1:9"
insecure = true
heartbeat = "200ms"
[metrics]
listen = %q
`, filepath.Join(dir, "data"), pxe, metrics)
}
