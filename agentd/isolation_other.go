//go:build !linux

package agentd

// kernelIsolation is "" off Linux: gVisor runs Linux programs only.
func kernelIsolation() string { return "" }
