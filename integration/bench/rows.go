package main

import (
	"context"
	"fmt"
	"time"
)

// runner is what the rows of one run (a backend, or the peer) share: the
// processes whose CPU is counted and which must stay up, and how to profile.
type runner struct {
	ctx   context.Context
	c     *config
	name  string
	pids  map[string]int
	procs []*proc // must not exit during the run
	// profile, when set, starts the CPU profiles of phase ("task", "sync")
	// over w; the function it returns waits for them.
	profile func(phase string, w window) (func(), error)
}

// window is the next phase's measured window: after the warm-up, --duration long.
func (x *runner) window() window {
	begin := time.Now()
	return window{from: begin.Add(x.c.warmup), to: begin.Add(x.c.warmup + x.c.duration)}
}

// alive fails when one of the run's processes has exited.
func (x *runner) alive() error {
	for _, p := range x.procs {
		if err := p.gone(); err != nil {
			return err
		}
	}
	return nil
}

// row logs what it runs, drives op in conc closed loops over w into a
// result named label, then checks that the processes are still up.
func (x *runner) row(what, label string, conc int, w window, op func(context.Context) (sample, error)) (*result, error) {
	logf("%s: %s", x.name, what)
	cmds := x.countRedis(w)
	res, err := drive(x.ctx, label, conc, w, x.pids, op)
	if err != nil {
		return nil, err
	}
	res.redisCmds = cmds()
	return res, x.alive()
}

// countRedis reads Redis's count of commands at w's start and, when the
// function it returns is called (at w's end), the count since: -1 when not
// asynq or unreadable. Every Redis client on the machine is counted.
func (x *runner) countRedis(w window) func() int64 {
	if x.name != "asynq" {
		return func() int64 { return -1 }
	}
	start := make(chan int64, 1)
	go func() {
		_ = sleepUntil(x.ctx, w.from)
		n, err := redisCommands(x.ctx, x.c.redisURL, x.name)
		if err != nil {
			n = -1
		}
		start <- n
	}()
	return func() int64 {
		n0 := <-start
		n1, err := redisCommands(x.ctx, x.c.redisURL, x.name)
		if err != nil || n0 < 0 {
			return -1
		}
		return n1 - n0
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-time.After(time.Until(t)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// profiledRow is row at --concurrency with the CPU profiles of phase over
// its window.
func (x *runner) profiledRow(phase, what, label string, op func(context.Context) (sample, error)) (*result, error) {
	w := x.window()
	done := func() {}
	if x.profile != nil {
		var err error
		if done, err = x.profile(phase, w); err != nil {
			return nil, err
		}
	}
	res, err := x.row(what, label, x.c.conc, w, op)
	done()
	return res, err
}

// taskRows runs the rows every run has, the backends and the peer alike:
// (b) the task path at --concurrency polling per --poll, (b′) the same
// with the other poll mode, (d) one at a time polling per --poll-one.
func (x *runner) taskRows(r *backendRun, cli *mcp) error {
	c := x.c
	var err error
	if r.task, err = x.profiledRow("task", fmt.Sprintf("(b) task path, %d clients, polls %s", c.conc, &c.poll),
		"(b)  task path: tools/call → tasks/get polls", cli.taskOp(c.call, c.poll)); err != nil {
		return err
	}
	alt := c.pollAltPolicy()
	if r.taskAlt, err = x.row(fmt.Sprintf("(b′) task path, %d clients, polls %s", c.conc, &alt),
		"(b′) task path, the other poll mode: "+alt.String(), c.conc, x.window(), cli.taskOp(c.call, alt)); err != nil {
		return err
	}
	r.task1, err = x.row("(d) task path, one at a time", "(d)  task path, one at a time", 1, x.window(), cli.taskOp(c.call, c.pollOnePolicy()))
	return err
}

// longRow runs (g): --long-concurrency clients each calling the long tool
// and polling as the server suggests until it completes. What it is for is
// the create latency: how soon a tool that outlasts the inline wait gets its
// handle — after the whole wait while the api has not seen the tool finish,
// at once after. So (g) has no warm-up: its window opens with the first
// calls, and counts every create answered in it.
func (x *runner) longRow(r *backendRun, cli *mcp) error {
	c := x.c
	begin := time.Now()
	w := window{from: begin, to: begin.Add(c.duration)}
	var err error
	r.long, err = x.row(fmt.Sprintf("(g) long tool %s, %d clients, no warm-up", c.long, c.longConc),
		"(g)  handle of a long tool", c.longConc, w, cli.taskOp(c.long, longPolicy))
	return err
}
