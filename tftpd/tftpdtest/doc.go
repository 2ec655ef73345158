// Package tftpdtest provides a loopback TFTP server and a client for tests of programs that
// use package tftpd, the way net/http/httptest does for HTTP.
package tftpdtest
