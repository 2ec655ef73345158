//go:build !linux

package main

import (
	"fmt"
	"os"
)

// main refuses: taps and network namespaces are Linux's.
func main() {
	fmt.Fprintln(os.Stderr, "delaylink: needs Linux (network namespaces and tap devices)")
	os.Exit(1)
}
