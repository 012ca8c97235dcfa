//go:build !linux

package main

import "os/exec"

// setChildAttrs does nothing here: only Linux has a parent-death signal;
// the demo stops its children itself when it ends.
func setChildAttrs(*exec.Cmd) {}

// startChild starts cmd.
func startChild(cmd *exec.Cmd) error { return cmd.Start() }
