package bmc_test

import (
	"errors"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
)

func TestExecutorValidate(t *testing.T) {
	for _, tc := range []struct {
		maxConcurrent int
		timeout       time.Duration
		field         string
	}{
		{0, 0, ""}, {1024, time.Hour, ""},
		{-1, 0, "MaxConcurrent"}, {1025, 0, "MaxConcurrent"},
		{0, -time.Second, "Timeout"}, {0, time.Hour + 1, "Timeout"},
	} {
		e := &bmc.Executor{MaxConcurrent: tc.maxConcurrent, Timeout: tc.timeout}
		got := ""
		var le *bmc.LimitError
		if err := e.Validate(); errors.As(err, &le) {
			got = le.Field
		} else if err != nil {
			t.Errorf("%d, %v: %v is no *LimitError", tc.maxConcurrent, tc.timeout, err)
		}
		if got != tc.field {
			t.Errorf("%d, %v: field %q, want %q", tc.maxConcurrent, tc.timeout, got, tc.field)
		}
	}
}
