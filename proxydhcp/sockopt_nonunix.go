//go:build !unix

package proxydhcp

func setBroadcast(fd uintptr) {}
