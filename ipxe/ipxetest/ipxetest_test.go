package ipxetest_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/bettercompute/siteboot/ipxe/ipxetest"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

// TestMain checks that Close leaves no goroutine of the server behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("User-Agent", "iPXE/1.21.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestServer(t *testing.T) {
	s := ipxetest.NewServer(map[string]string{"/boot.ipxe": "#!ipxe\nchain /next.ipxe\n"})
	defer s.Close()
	if code, ctype, body := get(t, s.URL+"/boot.ipxe?mac=52:54:00:12:34:56"); code != 200 || ctype != "text/plain; charset=utf-8" || body != "#!ipxe\nchain /next.ipxe\n" {
		t.Fatalf("GET /boot.ipxe: %d %q %q", code, ctype, body)
	}
	if code, _, _ := get(t, s.URL+"/next.ipxe"); code != 404 {
		t.Fatalf("GET of a path with no script: %d, want 404", code)
	}
	s.Set("/next.ipxe", "#!ipxe\nexit\n")
	if code, _, body := get(t, s.URL+"/next.ipxe"); code != 200 || body != "#!ipxe\nexit\n" {
		t.Fatalf("GET after Set: %d %q", code, body)
	}
	var paths []string
	for _, r := range s.Requests() {
		paths = append(paths, r.Method+" "+r.Path+" "+r.Query.Get("mac")+" "+r.UserAgent)
	}
	want := []string{"GET /boot.ipxe 52:54:00:12:34:56 iPXE/1.21.1", "GET /next.ipxe  iPXE/1.21.1", "GET /next.ipxe  iPXE/1.21.1"}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestSetRefusesNonScripts(t *testing.T) {
	for _, tt := range []struct{ path, script string }{
		{"/a", "chain /b\n"},    // no magic
		{"a", "#!ipxe\nexit\n"}, // not a path
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Set(%q, %q) did not panic", tt.path, tt.script)
				}
			}()
			s := ipxetest.NewServer(map[string]string{tt.path: tt.script})
			s.Close()
		}()
	}
}

func Example() {
	s := ipxetest.NewServer(map[string]string{"/boot.ipxe": "#!ipxe\necho hello\n"})
	defer s.Close()
	resp, err := http.Get(s.URL + "/boot.ipxe")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s%d request(s)\n", b, len(s.Requests()))
	// Output:
	// #!ipxe
	// echo hello
	// 1 request(s)
}
