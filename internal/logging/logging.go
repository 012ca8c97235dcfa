// Package logging builds the daemon's zap logger: human-readable console
// output in a terminal, JSON lines under a service manager.
package logging

import (
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"
)

// New returns a logger writing to stderr at the given level ("debug",
// "info", "warn", "error"); console format when stderr is a terminal, JSON
// otherwise.
func New(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	var cfg zap.Config
	if term.IsTerminal(int(os.Stderr.Fd())) {
		cfg = zap.NewDevelopmentConfig()
	} else {
		cfg = zap.NewProductionConfig()
		cfg.Sampling = nil
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.DisableStacktrace = true // errors here are conditions to read, not bugs to trace
	return cfg.Build()
}
