package configfile_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/examples/siteagent/configfile"
)

// TestTimeline: boot.timeline is on when absent or true, off when false; off with
// syslog_listen set is refused naming syslog_listen.
func TestTimeline(t *testing.T) {
	base, err := os.ReadFile("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	with := func(lines string) string {
		return strings.Replace(string(base), `http_listen = "0.0.0.0:80"`, `http_listen = "0.0.0.0:80"`+"\n"+lines, 1)
	}
	for _, tc := range []struct {
		text    string
		wantOff bool
	}{{string(base), false}, {with("timeline = true"), false}, {with("timeline = false"), true}} {
		f, err := configfile.Parse(tc.text)
		if err != nil {
			t.Fatal(err)
		}
		if f.Agent.Boot.NoTimeline != tc.wantOff {
			t.Errorf("NoTimeline %v, want %v", f.Agent.Boot.NoTimeline, tc.wantOff)
		}
	}
	_, err = configfile.Parse(with("timeline = false\nsyslog_listen = \"192.0.2.2:514\""))
	var ke *configfile.KeyError
	if !errors.As(err, &ke) || ke.Key != "boot.syslog_listen" {
		t.Errorf("timeline off with syslog_listen: %v; want a *KeyError naming boot.syslog_listen", err)
	}
	if _, err := configfile.Parse(with(`timeline = "no"`)); err == nil {
		t.Error(`timeline = "no" accepted`)
	}
}
