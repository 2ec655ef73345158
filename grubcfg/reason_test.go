package grubcfg_test

import (
	"errors"
	"testing"

	"github.com/bettercompute/siteboot/grubcfg"
)

func TestReasonOf(t *testing.T) {
	_, unsafe := grubcfg.Boot{Kernel: "http://192.0.2.1/${root}"}.Render()
	_, invalid := grubcfg.Boot{Kernel: "https://192.0.2.1/k"}.Render()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("elsewhere"), ""},
		{unsafe, "unsafe"},
		{invalid, "invalid"},
	} {
		if got := grubcfg.ReasonOf(tt.err); got != tt.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
