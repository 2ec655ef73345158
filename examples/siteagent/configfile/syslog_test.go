package configfile_test

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/examples/siteagent/configfile"
)

// TestSyslogListen: boot.syslog_listen is off when absent, typed when
// set, and a malformed one is refused naming the key (what -check reports).
func TestSyslogListen(t *testing.T) {
	base, err := os.ReadFile("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := configfile.Parse(string(base))
	if err != nil {
		t.Fatal(err)
	}
	if f.Agent.Boot.SyslogListen.IsValid() {
		t.Errorf("syslog receiver on by default: %v", f.Agent.Boot.SyslogListen)
	}
	with := func(v string) string {
		return strings.Replace(string(base), `http_listen = "0.0.0.0:80"`, `http_listen = "0.0.0.0:80"`+"\nsyslog_listen = \""+v+"\"", 1)
	}
	f, err = configfile.Parse(with("192.0.2.2:514"))
	if err != nil || f.Agent.Boot.SyslogListen != netip.MustParseAddrPort("192.0.2.2:514") {
		t.Errorf("syslog_listen = 192.0.2.2:514: %v, %v", err, f)
	}
	_, err = configfile.Parse(with("514"))
	var ke *configfile.KeyError
	if !errors.As(err, &ke) || ke.Key != "boot.syslog_listen" {
		t.Errorf("syslog_listen = 514: %v; want a *KeyError naming boot.syslog_listen", err)
	}
}
