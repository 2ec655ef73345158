//go:build !linux

package tftpd_test

// serveChild does nothing: the child it serves for runs on Linux only (see
// linklocal_linux_test.go).
func serveChild() {}
