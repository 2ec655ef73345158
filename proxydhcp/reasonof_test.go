package proxydhcp_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bettercompute/siteboot/proxydhcp"
)

func TestReasonOf(t *testing.T) {
	_, parseErr := proxydhcp.Parse([]byte{1, 2, 3})
	if parseErr == nil {
		t.Fatal("a 3-byte packet parsed")
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("elsewhere"), ""},
		{proxydhcp.ErrServerClosed, "server-closed"},
		{fmt.Errorf("serve: %w", proxydhcp.ErrServerClosed), "server-closed"},
		{parseErr, "malformed"},
		{&proxydhcp.OpError{Op: "read", Err: proxydhcp.ErrNotPXE}, "not-pxe"},
		{proxydhcp.ErrNoMAC, "no-mac"},
		{proxydhcp.ErrNoHandler, "no-handler"},
	} {
		if got := proxydhcp.ReasonOf(c.err); got != c.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
