package bmc_test

import (
	"errors"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
)

func TestExecutorValidate(t *testing.T) {
	for _, tc := range []struct {
		e     bmc.Executor
		field string
	}{
		{bmc.Executor{}, ""}, {bmc.Executor{MaxConcurrent: 1024, Timeout: time.Hour}, ""},
		{bmc.Executor{MaxConcurrent: -1}, "MaxConcurrent"}, {bmc.Executor{MaxConcurrent: 1025}, "MaxConcurrent"},
		{bmc.Executor{Timeout: -time.Second}, "Timeout"}, {bmc.Executor{Timeout: time.Hour + 1}, "Timeout"},
	} {
		got := ""
		var le *bmc.LimitError
		if err := tc.e.Validate(); errors.As(err, &le) {
			got = le.Field
		} else if err != nil {
			t.Errorf("%+v: %v is no *LimitError", tc.e, err)
		}
		if got != tc.field {
			t.Errorf("%+v: field %q, want %q", tc.e, got, tc.field)
		}
	}
}
