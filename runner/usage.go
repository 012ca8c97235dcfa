package runner

// Usage is what the commands a Manager started, while they run, use now:
// each command's whole process group (what it forked too).
type Usage struct {
	// CPUNanos is the CPU time their processes have used so far.
	CPUNanos uint64
	// MemoryBytes is their resident memory.
	MemoryBytes int64
	// Processes counts their processes (not threads).
	Processes int64
	// Commands counts the commands that run.
	Commands int
	// Counted is false where the OS gives no per-process counters (only
	// Commands is then set).
	Counted bool
}

// Usage samples the running commands' process groups.
func (m *Manager) Usage() Usage {
	groups := map[int]bool{}
	for _, in := range m.List() {
		if in.State == StateRunning && in.PID > 0 {
			groups[in.PID] = true // each command leads a group of its own
		}
	}
	u := groupsUsage(groups)
	u.Commands = len(groups)
	return u
}
