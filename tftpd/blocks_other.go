//go:build !linux

package tftpd

import "io/fs"

// newVecSource: files are read by offset or in sequence where preadv(2) is not used.
func newVecSource(f fs.File) blockSource { return nil }
