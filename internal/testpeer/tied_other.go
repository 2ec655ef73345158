//go:build !linux

package testpeer

import "os/exec"

// setDeathSignal does nothing: this system has no parent-death signal, and a process
// started here outlives a test binary that dies without its clean-up.
func setDeathSignal(*exec.Cmd) {}

// startTied starts cmd.
func startTied(cmd *exec.Cmd) error { return cmd.Start() }
