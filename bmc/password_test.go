package bmc_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
)

// TestNewPasswordMeetsEveryPolicy: passwords from NewPassword pass CheckPassword (every
// vendor policy it lists, Huawei's "no repeated characters" among them) and differ.
func TestNewPasswordMeetsEveryPolicy(t *testing.T) {
	seen := map[string]bool{}
	for i := range 2000 {
		pw, err := bmc.NewPassword(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := bmc.CheckPassword(pw, "ADMIN"); err != nil {
			t.Fatalf("try %d: %v", i, err)
		}
		if seen[pw] {
			t.Fatalf("try %d: a password came twice", i)
		}
		seen[pw] = true
	}
	// A reader that runs dry is an error, not a weak password.
	if _, err := bmc.NewPassword(bytes.NewReader(nil)); err == nil {
		t.Error("NewPassword from an empty reader: no error")
	}
}

func TestCheckPasswordNamesThePolicy(t *testing.T) {
	for _, tc := range []struct{ pw, user, want string }{
		{"Ab1-", "", "shorter"},
		{"Ab1-cdefghijkLmnoPq", "", "longer"},
		{"Ab1-cdefgh", "", ""},
		{"Ab1-cdefghc", "", "repeats"},       // Huawei
		{"Ab1-cdefgh\"", "", "outside"},      // quotes
		{"Ab1-cd@fgh", "", "outside"},        // iDRAC's @
		{"abc1-defghi", "", "lacks"},         // no upper-case
		{"Xadmin1-Yz", "ADMIN", "user name"}, // iLO, XCC
		{"Xnimda1-Yz", "admin", "user name"}, // reversed
	} {
		err := bmc.CheckPassword(tc.pw, tc.user)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.pw, err)
			}
			continue
		}
		if !errors.Is(err, bmc.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want ErrInvalid saying %q", tc.pw, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), tc.pw) {
			t.Errorf("the error quotes the password: %v", err)
		}
	}
}
