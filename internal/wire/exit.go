package wire

// ExitTimeout is the exit code clients report for a command that its
// timeout killed, as timeout(1) does.
const ExitTimeout = 124

// ExitCode is the exit code clients (agentctl, the MCP server) report for
// a process that ended, as a shell would: ExitTimeout when its timeout
// killed it, SignalExit(signal) when signal N (> 0) did, else its own
// exit code.
func ExitCode(code, signal int, timedOut bool) int {
	switch {
	case timedOut:
		return ExitTimeout
	case signal > 0:
		return SignalExit(signal)
	}
	return code
}

// SignalExit is 128+n, the code a shell reports for a process that signal
// n killed.
func SignalExit(n int) int { return 128 + n }
