package casreg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bettercompute/siteboot/casreg"
)

func TestReasonOf(t *testing.T) {
	r := &casreg.Memory{}
	ctx := context.Background()
	if _, err := r.CompareAndSwap(ctx, "k", 0, []byte("a")); err != nil {
		t.Fatal(err)
	}
	_, conflict := r.CompareAndSwap(ctx, "k", 0, []byte("b")) // the version moved on
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("etcd: unavailable"), ""},
		{conflict, "conflict"},
	} {
		if got := casreg.ReasonOf(tt.err); got != tt.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
