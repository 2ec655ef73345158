//go:build !unix

package testpeer

import "os/exec"

// setGroup does nothing: this system has no process groups to signal.
func setGroup(*exec.Cmd) {}

// terminateGroup ends the process: this system has no SIGTERM to send.
func terminateGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// killGroup ends the process.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
