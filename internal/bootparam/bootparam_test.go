package bootparam_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/internal/bootparam"
)

func TestSleeps(t *testing.T) {
	for _, tc := range []struct {
		attempts        int
		delay, maxDelay time.Duration
		want            []int
		field           string
	}{
		{0, 0, 0, []int{2, 4, 8}, ""},
		{6, 5 * time.Second, 12 * time.Second, []int{5, 10, 12, 12, 12}, ""},
		{1, 0, 0, []int{}, ""},
		{2, 40 * time.Second, 0, []int{40}, ""}, // the cap defaults to at least the delay
		{17, 0, 0, nil, "retry.attempts"},
		{-1, 0, 0, nil, "retry.attempts"},
		{2, 1500 * time.Millisecond, 0, nil, "retry.delay"},
		{2, 10 * time.Second, 5 * time.Second, nil, "retry.max_delay"},
		{2, 2 * time.Hour, 0, nil, "retry.delay"},
	} {
		got, p := bootparam.Sleeps(tc.attempts, tc.delay, tc.maxDelay, "GRUB")
		field := ""
		if p != nil {
			field = p.Field
			if p.Unsafe {
				t.Errorf("Sleeps(%d, %v, %v): a range problem marked unsafe", tc.attempts, tc.delay, tc.maxDelay)
			}
		}
		if field != tc.field || cmp.Diff(tc.want, got) != "" {
			t.Errorf("Sleeps(%d, %v, %v) = %v, %+v; want %v, field %q", tc.attempts, tc.delay, tc.maxDelay, got, p, tc.want, tc.field)
		}
	}
}

func TestCheckName(t *testing.T) {
	dollar := func(b byte) string {
		if b == '$' {
			return "'$' expands a variable"
		}
		return ""
	}
	for _, tc := range []struct {
		name   string
		ok     bool
		unsafe bool
		reason string
	}{
		{"console", true, false, ""},
		{"bc.token", true, false, ""},
		{"a-b_c.9", true, false, ""},
		{"", false, false, "empty name"},
		{".x", false, true, `name: character '.'`},
		{"x$y", false, true, "name: '$' expands a variable"},
		{"x y", false, true, `name: character ' '`},
		{string(make([]byte, 65)), false, true, "name longer than 64 bytes"},
	} {
		p := bootparam.CheckName("params[0]", tc.name, dollar)
		if (p == nil) != tc.ok {
			t.Errorf("CheckName(%q) = %+v, want ok %v", tc.name, p, tc.ok)
			continue
		}
		if p != nil && (p.Unsafe != tc.unsafe || p.Reason != tc.reason || p.Field != "params[0]") {
			t.Errorf("CheckName(%q) = %+v, want unsafe %v, reason %q", tc.name, p, tc.unsafe, tc.reason)
		}
	}
}
