//go:build !linux

package tftpd

import "io/fs"

// newVecSource: files are read by offset or in sequence where preadv(2) is not used.
func newVecSource(f fs.File) blockSource { return nil }

// fileMaps: files are mapped only on Linux.
type fileMaps struct{}

func (fm *fileMaps) take(f fs.File) ([]byte, func()) { return nil, func() {} }

func (fm *fileMaps) mapped() int { return 0 }
