package install

import (
	"context"
	"runtime"

	"github.com/kardianos/service"
)

// RunService runs run(ctx) as the body of `agentd run`. On Windows, when the
// Service Control Manager started the process, it first answers the SCM
// (which otherwise kills a service that does not report in) and cancels ctx
// when the SCM asks the service to stop; everywhere else, and from a
// terminal, it calls run(ctx) as it is: systemd and launchd stop agentd with
// SIGTERM, which the caller's signal context already handles.
func RunService(ctx context.Context, run func(context.Context) error) error {
	if runtime.GOOS != "windows" || service.Interactive() {
		return run(ctx)
	}
	p := &scmProgram{run: run, parent: ctx, done: make(chan struct{})}
	svc, err := service.New(p, &service.Config{Name: "agentd"})
	if err != nil {
		return err
	}
	if err := svc.Run(); err != nil {
		return err
	}
	return p.err
}

// scmProgram adapts run to kardianos's Start/Stop callbacks.
type scmProgram struct {
	run    func(context.Context) error
	parent context.Context
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (p *scmProgram) Start(service.Service) error {
	ctx, cancel := context.WithCancel(p.parent)
	p.cancel = cancel
	go func() {
		defer close(p.done)
		p.err = p.run(ctx)
	}()
	return nil
}

func (p *scmProgram) Stop(service.Service) error {
	p.cancel()
	<-p.done
	return nil
}

var _ service.Interface = (*scmProgram)(nil)
