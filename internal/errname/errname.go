// Package errname names an error by the first of a package's sentinels in its chain: the
// body of most siteboot packages' ReasonOf (see the root package's conventions); bmc,
// discovery, assertion and imagecache write their own.
package errname

import "errors"

// Name pairs a sentinel with the short stable name a host counts it under.
type Name struct {
	Err  error
	Name string
}

// Table lists a package's sentinels in the order they are tried: a sentinel that wraps
// another goes before it.
type Table []Name

// Of returns the name of the first sentinel of t in err's chain (errors.Is), "" for nil
// and for an error none of them matches.
func (t Table) Of(err error) string {
	if err == nil {
		return ""
	}
	for _, n := range t {
		if errors.Is(err, n.Err) {
			return n.Name
		}
	}
	return ""
}
