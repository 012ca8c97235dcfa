//go:build !unix

package pgtest

import "os/exec"

func prepareDir(string) error { return nil }

func asOwner(*exec.Cmd) {}
