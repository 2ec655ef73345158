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
	f, err = configfile.Parse(set("power_on_rate = 50.0\npower_on_burst = 2\ngroup_power_on_rate = 5.5\ngroup_power_on_burst = 1\nnetwork_in_flight = 8\ntransition_settle = \"1500ms\"\nmax_sessions = 64\nsession_idle = \"10s\""))
	if err != nil {
		t.Fatal(err)
	}
	if b := f.Agent.BMC; b.PowerOnRate != 50 || b.PowerOnBurst != 2 || b.GroupPowerOnRate != 5.5 || b.GroupPowerOnBurst != 1 ||
		b.NetworkInFlight != 8 || b.TransitionSettle != 1500*time.Millisecond || b.MaxSessions != 64 || b.SessionIdle != 10*time.Second {
		t.Errorf("BMC transition limits = %+v", b)
	}
	for keys, wantKey := range map[string]string{
		`timeout = "soon"`:            "bmc.timeout",
		`max_concurrent = -1`:         "bmc.max_concurrent",
		`cache_url = "ftp://x/cache"`: "bmc.cache_url",
		`retries = 3`:                 "bmc.retries",
		`power_on_rate = -1.0`:        "bmc.power_on_rate",
		`power_on_burst = -2`:         "bmc.power_on_burst",
		`group_power_on_rate = -0.5`:  "bmc.group_power_on_rate",
		`network_in_flight = -1`:      "bmc.network_in_flight",
		`max_sessions = -1`:           "bmc.max_sessions",
		`session_idle = "-1s"`:        "bmc.session_idle",
		`session_idle = "often"`:      "bmc.session_idle",
		`transition_settle = "later"`: "bmc.transition_settle",
		`transition_settle = "-1s"`:   "bmc.transition_settle",
	} {
		_, err := configfile.Parse(set(keys))
		var ke *configfile.KeyError
		if !errors.As(err, &ke) || ke.Key != wantKey {
			t.Errorf("%s: %v, want an error naming %s", keys, err, wantKey)
		}
	}
}
