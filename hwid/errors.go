package hwid

import "github.com/bettercompute/siteboot/internal/errname"

// ReasonOf names the first of the package's errors in err's chain in a word a host can
// count: "bad-mac", "bad-uuid", "bad-arch"; "" for nil or an error of another package.
func ReasonOf(err error) string { return reasons.Of(err) }

var reasons = errname.Table{
	{Err: ErrBadMAC, Name: "bad-mac"},
	{Err: ErrBadUUID, Name: "bad-uuid"},
	{Err: ErrBadArch, Name: "bad-arch"},
}
