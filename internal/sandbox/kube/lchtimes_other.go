//go:build !linux

package kube

import (
	"os"
	"time"
)

// lchtimes keeps no symlink times off Linux (hostPath workspaces are the
// hub's on a Linux node).
func lchtimes(*os.Root, string, time.Time) error { return nil }
