package sitelink_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bettercompute/siteboot/sitelink"
)

func TestReasonOf(t *testing.T) {
	_, errPlain := sitelink.NewClient(sitelink.ClientConfig{URL: "http://192.0.2.1:8443"})
	_, errURL := sitelink.NewClient(sitelink.ClientConfig{URL: "ftp://192.0.2.1"})
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""}, {errors.New("other"), ""},
		{errPlain, "plain-http"}, {errURL, "client-config"},
		{fmt.Errorf("heartbeat: %w", sitelink.ErrForbidden), "forbidden"},
		{sitelink.ErrNotReady, "not-ready"},
		{fmt.Errorf("%w: no MAC", sitelink.ErrBadEntry), "bad-entry"},
		{fmt.Errorf("%w: kind x", sitelink.ErrBadCommand), "bad-command"},
	} {
		if got := sitelink.ReasonOf(c.err); got != c.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
