//go:build !unix

package snapshot

import "time"

func selfCPU() time.Duration     { return 0 }
func childrenCPU() time.Duration { return 0 }
