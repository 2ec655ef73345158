package bmc

import (
	"crypto/rand"
	"io"
	"math/big"
	"strings"
)

// PasswordLen is the length of the passwords NewPassword makes: what IPMI stores in its
// 16-byte form, so that every BMC and every IPMI version takes it.
const PasswordLen = 16

// PasswordSpecials are the only non-alphanumeric characters NewPassword uses: none is
// refused by a BMC policy listed at CheckPassword, and none needs quoting in a shell,
// a URL's user part, JSON or ipmitool's arguments.
const PasswordSpecials = "-_.+"

const (
	pwUpper  = "ABCDEFGHJKLMNPQRSTUVWXYZ"
	pwLower  = "abcdefghijkmnopqrstuvwxyz"
	pwDigits = "23456789"
)

// NewPassword returns a password of PasswordLen characters from r (crypto/rand when nil)
// that every policy CheckPassword lists accepts: two upper-case letters, two lower-case,
// two digits and two of PasswordSpecials at least, no character twice, a letter first.
func NewPassword(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	pick := func(set string, used map[byte]bool) (byte, error) {
		var free []byte
		for i := 0; i < len(set); i++ {
			if !used[set[i]] {
				free = append(free, set[i])
			}
		}
		n, err := rand.Int(r, big.NewInt(int64(len(free))))
		if err != nil {
			return 0, err
		}
		c := free[n.Int64()]
		used[c] = true
		return c, nil
	}
	used := map[byte]bool{}
	var out []byte
	for _, set := range []string{pwUpper, pwUpper, pwLower, pwLower, pwDigits, pwDigits, PasswordSpecials, PasswordSpecials} {
		c, err := pick(set, used)
		if err != nil {
			return "", err
		}
		out = append(out, c)
	}
	all := pwUpper + pwLower + pwDigits
	for len(out) < PasswordLen {
		c, err := pick(all, used)
		if err != nil {
			return "", err
		}
		out = append(out, c)
	}
	// Shuffle (Fisher-Yates), then put a letter first.
	for i := len(out) - 1; i > 0; i-- {
		n, err := rand.Int(r, big.NewInt(int64(i+1)))
		if err != nil {
			return "", err
		}
		j := n.Int64()
		out[i], out[j] = out[j], out[i]
	}
	for i, c := range out {
		if strings.IndexByte(pwUpper+pwLower, c) >= 0 {
			out[0], out[i] = out[i], out[0]
			break
		}
	}
	return string(out), nil
}

// CheckPassword says whether password meets every BMC password policy known here; the
// error (ErrInvalid) names the first it fails, never the password:
//
//   - 8 to 16 bytes: Supermicro and Lenovo XCC want 8 or more (XCC 10 by default, see
//     below); IPMI 1.5 and some BMCs' IPMI store 16 at most.
//   - 10 or more, with upper-case, lower-case, a digit and a special character: Lenovo
//     XCC's and Huawei iBMC's complexity rules, Dell iDRAC's strong-password policy.
//   - no character repeated: Huawei iBMC refuses repeated characters.
//   - only letters, digits and PasswordSpecials: iDRAC and Supermicro refuse some
//     punctuation (quotes, <, >, &, spaces, @ on iDRAC).
//   - not the user name, nor the user name reversed, inside it (iLO, XCC).
func CheckPassword(password, username string) error {
	bad := func(msg string) error {
		return &OpError{Op: "password", Kind: ErrInvalid, Message: "the password " + msg}
	}
	switch {
	case len(password) < 10:
		return bad("is shorter than 10 characters")
	case len(password) > PasswordLen:
		return bad("is longer than 16 characters")
	}
	var upper, lower, digit, special bool
	seen := map[rune]bool{}
	for _, c := range password {
		switch {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= '0' && c <= '9':
			digit = true
		case strings.ContainsRune(PasswordSpecials, c):
			special = true
		default:
			return bad("has a character outside letters, digits and " + PasswordSpecials)
		}
		if seen[c] {
			return bad("repeats a character")
		}
		seen[c] = true
	}
	if !upper || !lower || !digit || !special {
		return bad("lacks an upper-case letter, a lower-case letter, a digit or one of " + PasswordSpecials)
	}
	if u := strings.ToLower(username); u != "" {
		rev := []rune(u)
		for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
			rev[i], rev[j] = rev[j], rev[i]
		}
		p := strings.ToLower(password)
		if strings.Contains(p, u) || strings.Contains(p, string(rev)) {
			return bad("contains the user name")
		}
	}
	return nil
}
