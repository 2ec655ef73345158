//go:build !unix

package connlimit

import "errors"

// NOFILE is not available on this system.
func NOFILE() (soft, hard uint64, err error) { return 0, 0, errors.ErrUnsupported }

// RaiseNOFILE is not available on this system.
func RaiseNOFILE() (uint64, error) { return 0, errors.ErrUnsupported }
