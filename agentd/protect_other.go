//go:build !linux

package agentd

// ProtectFromWorkload does nothing outside Linux, where sandboxes do not
// run.
func ProtectFromWorkload() error { return nil }
