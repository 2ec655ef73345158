package configfile_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/configfile"
)

// TestBMCKeys: the [bmc] table's keys reach agent.Config.BMC, and a bad value names its key.
func TestBMCKeys(t *testing.T) {
	base, err := os.ReadFile("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	set := func(keys string) string {
		return strings.Replace(string(base), "[bmc]\n", "[bmc]\n"+keys+"\n", 1)
	}
	f, err := configfile.Parse(set("max_concurrent = 4\ntimeout = \"90s\"\ncache_url = \"http://198.51.100.2:8080/cache\""))
	if err != nil {
		t.Fatal(err)
	}
	if b := f.Agent.BMC; b.MaxConcurrent != 4 || b.Timeout != 90*time.Second || b.CacheURL != "http://198.51.100.2:8080/cache" {
		t.Errorf("BMC = %+v", b)
	}
	for keys, wantKey := range map[string]string{
		`timeout = "soon"`:            "bmc.timeout",
		`max_concurrent = -1`:         "bmc.max_concurrent",
		`cache_url = "ftp://x/cache"`: "bmc.cache_url",
		`retries = 3`:                 "bmc.retries",
	} {
		_, err := configfile.Parse(set(keys))
		var ke *configfile.KeyError
		if !errors.As(err, &ke) || ke.Key != wantKey {
			t.Errorf("%s: %v, want an error naming %s", keys, err, wantKey)
		}
	}
}
