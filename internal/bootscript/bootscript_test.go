package bootscript_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/internal/bootscript"
)

var (
	errUnsafe  = bootscript.NewSentinel("testlang", "unsafe")
	errInvalid = bootscript.NewSentinel("testlang", "invalid")
)

// testLang is a language with one byte of its own ('\”) and one token of its own ("#...").
var testLang = &bootscript.Lang{
	Name:       "Test",
	ErrUnsafe:  errUnsafe,
	ErrInvalid: errInvalid,
	Syntax: func(b byte) string {
		if b == '\'' {
			return "single quote (test quoting)"
		}
		return ""
	},
	Token: func(s string) string {
		if s[0] == '#' {
			return "'#' starts a comment"
		}
		return ""
	},
}

// bare is a language that adds nothing to the core's rules.
var bare = &bootscript.Lang{Name: "Bare", ErrUnsafe: errUnsafe, ErrInvalid: errInvalid}

// refused checks that err is a *ValueError for field wrapping want, and returns it.
func refused(t *testing.T, err error, field string, want error) *bootscript.ValueError {
	t.Helper()
	var ve *bootscript.ValueError
	if !errors.As(err, &ve) || !errors.Is(err, want) {
		t.Fatalf("error %v, want a *ValueError wrapping %v", err, want)
	}
	if ve.Field != field {
		t.Errorf("field %q, want %q", ve.Field, field)
	}
	return ve
}

func TestValueError(t *testing.T) {
	err := testLang.Unsafe("params[bc.token]", "white space")
	if got, want := err.Error(), "testlang: params[bc.token]: white space"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, errUnsafe) || errors.Is(err, errInvalid) {
		t.Errorf("%v: wraps the wrong sentinel", err)
	}
	if got, want := errUnsafe.Error(), "testlang: unsafe"; got != want {
		t.Errorf("sentinel text %q, want %q", got, want)
	}
	// Two sentinels with the same text are still two errors.
	if errors.Is(err, bootscript.NewSentinel("testlang", "unsafe")) {
		t.Error("a sentinel matched another one with the same text")
	}
	other := &bootscript.ValueError{Field: "x", Reason: "y", Err: errors.New("elsewhere")}
	if got := other.Error(); got != "bootscript: x: y" {
		t.Errorf("without a sentinel: %q", got)
	}
}

func TestByteReason(t *testing.T) {
	for _, tc := range []struct {
		b        byte
		lang     *bootscript.Lang
		contains string // "" means allowed
	}{
		{'a', testLang, ""},
		{'=', testLang, ""},
		{'#', testLang, ""}, // only a whole token starting with '#' is syntax
		{' ', testLang, "white space"},
		{'\t', testLang, "control character 0x09"},
		{'\n', testLang, "control character 0x0a"},
		{0x7f, testLang, "control character 0x7f"},
		{0xa0, testLang, "non-ASCII"},
		{'"', testLang, "double quote"},
		{'\\', testLang, "backslash"},
		{'$', testLang, "'$'"},
		{'\'', testLang, "single quote (test quoting)"},
		{'\'', bare, ""},
	} {
		got := tc.lang.ByteReason(tc.b)
		if tc.contains == "" && got != "" || !strings.Contains(got, tc.contains) {
			t.Errorf("%s.ByteReason(%q) = %q, want %q", tc.lang.Name, tc.b, got, tc.contains)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ok     bool
		want   error
		reason string
	}{
		{"console", true, nil, ""},
		{"bc.token", true, nil, ""},
		{"a-b_c.9", true, nil, ""},
		{"", false, errInvalid, "empty name"},
		{".x", false, errUnsafe, `name: character '.'`},
		{"x$y", false, errUnsafe, "name: '$' (variable expansion)"},
		{"x'y", false, errUnsafe, "name: single quote (test quoting)"},
		{"x y", false, errUnsafe, "name: white space"},
		{"x=y", false, errUnsafe, `name: character '='`},
		{strings.Repeat("n", 65), false, errUnsafe, "name longer than 64 bytes"},
	} {
		err := testLang.CheckName("params[0]", tc.name)
		if tc.ok {
			if err != nil {
				t.Errorf("CheckName(%q) = %v", tc.name, err)
			}
			continue
		}
		ve := refused(t, err, "params[0]", tc.want)
		if ve.Reason != tc.reason {
			t.Errorf("CheckName(%q): reason %q, want %q", tc.name, ve.Reason, tc.reason)
		}
	}
}

func TestCheckToken(t *testing.T) {
	for _, tc := range []struct {
		tok  string
		want error
	}{
		{"quiet", nil},
		{"console=ttyS0,115200n8", nil},
		{"", errInvalid},
		{"#x", errUnsafe},
		{"x#", nil},
		{"a'b", errUnsafe},
		{strings.Repeat("x", bootscript.MaxValueLen+1), errUnsafe},
	} {
		err := testLang.CheckToken("cmdline[0]", tc.tok)
		if tc.want == nil {
			if err != nil {
				t.Errorf("CheckToken(%.20q) = %v", tc.tok, err)
			}
			continue
		}
		refused(t, err, "cmdline[0]", tc.want)
	}
	if err := bare.CheckToken("cmdline[0]", "#x"); err != nil {
		t.Errorf("a language without tokens of its own refused %q: %v", "#x", err)
	}
}

func TestCmdline(t *testing.T) {
	p := func(name, value string) bootscript.Param { return bootscript.Param{Name: name, Value: value} }
	for _, tc := range []struct {
		name   string
		lead   []string
		params []bootscript.Param
		tokens []string
		limit  int
		want   []string
		field  string
		is     error
	}{
		{name: "empty", want: []string{}},
		{name: "in order", lead: []string{"initrd=initrd0"}, params: []bootscript.Param{p("bc.token", "t"), p("bc.x", "")},
			tokens: []string{"console=ttyS0", "quiet"}, want: []string{"initrd=initrd0", "bc.token=t", "bc.x=", "console=ttyS0", "quiet"}},
		{name: "exactly the limit", params: []bootscript.Param{p("a", "bcdef")}, limit: 8, want: []string{"a=bcdef"}},
		{name: "one over the limit", params: []bootscript.Param{p("a", "bcdefg")}, limit: 8, field: "cmdline", is: errInvalid},
		{name: "the lead counts", lead: []string{"initrd=initrd0"}, params: []bootscript.Param{p("a", "b")}, limit: 16, field: "cmdline", is: errInvalid},
		{name: "default limit", tokens: []string{strings.Repeat("x", 1000), strings.Repeat("y", 1000), strings.Repeat("z", 45)}, want: []string{strings.Repeat("x", 1000), strings.Repeat("y", 1000), strings.Repeat("z", 45)}},
		{name: "over the default limit", tokens: []string{strings.Repeat("x", 1000), strings.Repeat("y", 1000), strings.Repeat("z", 46)}, field: "cmdline", is: errInvalid},
		{name: "bad name", params: []bootscript.Param{p("-x", "1")}, field: "params[0]", is: errUnsafe},
		{name: "empty name", params: []bootscript.Param{p("ok", "1"), p("", "1")}, field: "params[1]", is: errInvalid},
		{name: "twice", params: []bootscript.Param{p("bc.a", "1"), p("bc.a", "2")}, field: "params[bc.a]", is: errInvalid},
		{name: "space in a value", params: []bootscript.Param{p("bc.a", "1 2")}, field: "params[bc.a]", is: errUnsafe},
		{name: "language byte in a value", params: []bootscript.Param{p("bc.a", "'")}, field: "params[bc.a]", is: errUnsafe},
		{name: "token sets a boot parameter", tokens: []string{"bc.token=x"}, field: "cmdline[0]", is: errInvalid},
		{name: "token names a reserved flag", tokens: []string{"quiet", "bc.debug"}, field: "cmdline[1]", is: errInvalid},
		{name: "token repeats a parameter", params: []bootscript.Param{p("console", "tty0")}, tokens: []string{"console=ttyS0"}, field: "cmdline[0]", is: errInvalid},
		{name: "empty token", tokens: []string{""}, field: "cmdline[0]", is: errInvalid},
		{name: "comment token", tokens: []string{"#"}, field: "cmdline[0]", is: errUnsafe},
		{name: "quote in a token", tokens: []string{`a="b c"`}, field: "cmdline[0]", is: errUnsafe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testLang.Cmdline(tc.lead, tc.params, tc.tokens, tc.limit)
			if tc.is != nil {
				refused(t, err, tc.field, tc.is)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSleeps(t *testing.T) {
	for _, tc := range []struct {
		r     bootscript.Retry
		want  []int
		field string
	}{
		{bootscript.Retry{}, []int{2, 4, 8}, ""},
		{bootscript.Retry{Attempts: 6, Delay: 5 * time.Second, MaxDelay: 12 * time.Second}, []int{5, 10, 12, 12, 12}, ""},
		{bootscript.Retry{Attempts: 1}, []int{}, ""},
		{bootscript.Retry{Attempts: 2, Delay: 40 * time.Second}, []int{40}, ""}, // the cap defaults to at least the delay
		{bootscript.Retry{Attempts: 17}, nil, "retry.attempts"},
		{bootscript.Retry{Attempts: -1}, nil, "retry.attempts"},
		{bootscript.Retry{Attempts: 2, Delay: 1500 * time.Millisecond}, nil, "retry.delay"},
		{bootscript.Retry{Attempts: 2, Delay: 10 * time.Second, MaxDelay: 5 * time.Second}, nil, "retry.max_delay"},
		{bootscript.Retry{Attempts: 2, Delay: 2 * time.Hour}, nil, "retry.delay"},
	} {
		got, err := testLang.Sleeps(tc.r)
		if tc.field != "" {
			refused(t, err, tc.field, errInvalid)
			continue
		}
		if err != nil {
			t.Errorf("Sleeps(%+v): %v", tc.r, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Sleeps(%+v) (-want +got):\n%s", tc.r, diff)
		}
	}
}

func TestSeconds(t *testing.T) {
	if n, err := testLang.Seconds("delay", 0, 30*time.Second); n != 30 || err != nil {
		t.Errorf("zero: %d, %v; want the default, 30", n, err)
	}
	if n, err := testLang.Seconds("delay", time.Hour, 0); n != 3600 || err != nil {
		t.Errorf("an hour: %d, %v", n, err)
	}
	ve := refused(t, func() error { _, err := testLang.Seconds("delay", 2500*time.Millisecond, 0); return err }(), "delay", errInvalid)
	if !strings.Contains(ve.Reason, "Test sleeps in seconds") {
		t.Errorf("reason %q does not name the language", ve.Reason)
	}
	refused(t, func() error { _, err := testLang.Seconds("delay", time.Hour+time.Second, 0); return err }(), "delay", errInvalid)
	refused(t, func() error { _, err := testLang.Seconds("delay", -time.Second, 0); return err }(), "delay", errInvalid)
}

func TestCheckInitrds(t *testing.T) {
	if err := testLang.CheckInitrds(bootscript.MaxInitrds); err != nil {
		t.Errorf("%d initrds: %v", bootscript.MaxInitrds, err)
	}
	refused(t, testLang.CheckInitrds(bootscript.MaxInitrds+1), "initrds", errInvalid)
}

// steps records a plan as the writer's calls.
type steps []string

func (s *steps) Label(name string)   { *s = append(*s, ":"+name) }
func (s *steps) Echo(msg string)     { *s = append(*s, "echo "+msg) }
func (s *steps) Sleep(n int)         { *s = append(*s, fmt.Sprint("sleep ", n)) }
func (s *steps) Again(target string) { *s = append(*s, "again "+target) }
func (s *steps) Reboot()             { *s = append(*s, "reboot") }
func (s *steps) GiveUp()             { *s = append(*s, "give up") }

func TestPlans(t *testing.T) {
	var got steps
	bootscript.Attempts(&got, []int{2, 4}, "/again", func(onFail string) { got = append(got, "try, else "+onFail) })
	want := steps{
		"try, else retry1", ":retry1", "echo attempt 1 of 3 failed, retrying in 2 s", "sleep 2",
		"try, else retry2", ":retry2", "echo attempt 2 of 3 failed, retrying in 4 s", "sleep 4",
		"try, else failed", ":failed", "echo giving up after 3 attempts", "again /again",
		":reboot", "sleep 10", "reboot",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Attempts (-want +got):\n%s", diff)
	}

	got = nil
	bootscript.Attempts(&got, nil, "", func(onFail string) { got = append(got, "try, else "+onFail) })
	// Without a fallback (the chain script) the plan gives up: it never reboots into the
	// same network boot.
	want = steps{"try, else failed", ":failed", "echo giving up after 1 attempts", "give up"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("one attempt, no again (-want +got):\n%s", diff)
	}

	fenced, err := testLang.Fenced(7 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	fenced.Steps(&got)
	if diff := cmp.Diff(steps{"echo boot server fenced, giving up in 7 s", "sleep 7", "give up"}, got); diff != "" {
		t.Errorf("Fenced (-want +got):\n%s", diff)
	}
	if fenced.Comment != "this boot server is not the active one" {
		t.Errorf("Fenced comment %q", fenced.Comment)
	}

	wait, err := testLang.Wait(0, "/chain")
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	wait.Steps(&got)
	if diff := cmp.Diff(steps{"echo not ready, asking again in 30 s", "sleep 30", "again /chain", ":reboot", "sleep 10", "reboot"}, got); diff != "" {
		t.Errorf("Wait (-want +got):\n%s", diff)
	}
	if wait.Comment != "not ready yet; asking again in 30 s" {
		t.Errorf("Wait comment %q", wait.Comment)
	}

	_, err = testLang.Fenced(1500 * time.Millisecond)
	refused(t, err, "delay", errInvalid)
	_, err = testLang.Wait(2*time.Hour, "/chain")
	refused(t, err, "delay", errInvalid)
}
