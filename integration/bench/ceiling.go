package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// ceilingMode picks what the consumer side does with each job.
type ceilingMode int

const (
	// bare: Mutate to completed, ack — the lifecycle the brief calls the ceiling.
	bare ceilingMode = iota
	// workerOps: the record operations consumer.Worker performs for the
	// demo `noop` tool: Get, then two writes each starting from the version
	// it holds (taskstate.MutateFrom): take (attempt+lease), completed; ack.
	workerOps
)

// ceiling runs the broker lifecycle in-process against the real seams
// (cli.Options.Connect: natsbroker+natskv or asynqbroker+redisstate, configured
// as the binaries configure them): conc producers write the record and
// enqueue the job (producer.Create), conc slots take jobs with
// Consumer.Next, write the terminal state with taskstate.Mutate and ack. At
// most conc tasks are in flight (created, not yet acked), like conc clients
// each waiting on one task.
func ceiling(ctx context.Context, o cli.Options, name string, mode ceilingMode, conc int, warmup, dur time.Duration, pids map[string]int, profile string) (*result, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	b, err := o.Connect(cctx, "bench-ceiling", zerolog.Nop())
	cancel()
	if err != nil {
		return nil, err
	}
	defer b.Close()
	prod := producer.New(b.Store, producer.QueueExecutor{Queue: b.Queue, Bus: b.Bus}, &producer.Config{Logger: zerolog.Nop()})

	// Published as a worker of the default pool publishes it: on Asynq the
	// jobs then go to the pool's queue, as they do for the binaries.
	if err := b.Catalog.PublishTool(ctx, &taskstate.ToolInfo{Name: "noop", InputSchema: json.RawMessage(`{"type":"object"}`),
		TaskSupport: taskstate.TaskOptional, Pool: broker.DefaultPool, LiveUntil: time.Now().Add(warmup + dur + time.Minute)}); err != nil {
		return nil, err
	}
	consCtx, stopCons := context.WithCancel(ctx)
	defer stopCons()
	cons, err := b.Queue.Consumer(consCtx, broker.ConsumerOptions{Tools: []broker.ToolRoute{{Tool: "noop"}}, Lease: 30 * time.Second, MaxDeliveries: 30, Slots: conc})
	if err != nil {
		return nil, err
	}

	begin := time.Now()
	win := window{from: begin.Add(warmup), to: begin.Add(warmup + dur)}
	rec := newRecorder(name, conc, win)
	cpu := watchCPU(pids, win)
	if profile != "" {
		stopProf, err := profileWindow(profile, win)
		if err != nil {
			return nil, err
		}
		defer stopProf()
	}

	inflight := make(chan struct{}, conc) // a token per task created and not yet acked
	io := context.WithoutCancel(ctx)      // a started create or settle always completes
	args := json.RawMessage(`{}`)

	var prods sync.WaitGroup
	for range conc {
		prods.Go(func() {
			for {
				select {
				case inflight <- struct{}{}:
				case <-ctx.Done():
					return
				}
				if !time.Now().Before(win.to) {
					<-inflight
					return
				}
				t0 := time.Now()
				_, err := prod.Create(io, &producer.Request{Tool: "noop", Arguments: args, Mode: taskstate.ModeTask, Era: taskstate.Era20260728})
				if err != nil {
					rec.fail(fmt.Errorf("create: %w", err))
					if errors.Is(err, producer.ErrStart) {
						// The record is failed; its job may or may not be queued.
						// Hand the token back only if no consumer will.
						continue
					}
					<-inflight
					continue
				}
				rec.createDone(time.Now(), time.Since(t0))
			}
		})
	}

	now := time.Now
	var slots sync.WaitGroup
	for range conc {
		slots.Go(func() {
			for {
				d, err := cons.Next(consCtx)
				if err != nil {
					return
				}
				id := d.Job().TaskID
				t, err := settle(io, b.Store, id, mode, now)
				if err != nil {
					rec.fail(err)
				}
				if err := d.Ack(io); err != nil {
					rec.fail(fmt.Errorf("ack: %w", err))
				}
				done := time.Now()
				if t != nil && t.Status == taskstate.Completed {
					rec.done(done, sample{e2e: done.Sub(t.CreatedAt)})
				}
				select {
				case <-inflight:
				default:
				}
			}
		})
	}

	prods.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// Let the tasks still in flight finish, so the next phase starts quiet.
	drain := time.Now().Add(15 * time.Second)
	for len(inflight) > 0 && time.Now().Before(drain) {
		time.Sleep(5 * time.Millisecond)
	}
	stopCons()
	slots.Wait()
	r := rec.result()
	r.cpu = cpu.wait()
	if n := len(inflight); n > 0 {
		rec.fail(fmt.Errorf("%d tasks still unfinished 15s after the phase ended", n))
	}
	return r, nil
}

// settle does the consumer side's record work for one job.
func settle(ctx context.Context, st taskstate.Store, id string, mode ceilingMode, now func() time.Time) (*taskstate.Task, error) {
	var known *taskstate.Task
	if mode == workerOps {
		cur, err := st.Get(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("get: %w", err)
		}
		if known, err = taskstate.MutateFrom(ctx, st, cur, id, now, func(t *taskstate.Task) error {
			t.Attempt++
			t.Lease = &taskstate.Lease{Worker: "bench", Expires: now().Add(30 * time.Second).UTC()}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("take: %w", err)
		}
	}
	t, err := taskstate.MutateFrom(ctx, st, known, id, now, func(t *taskstate.Task) error {
		t.Lease = nil
		t.Status = taskstate.Completed
		t.Result = json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("complete: %w", err)
	}
	return t, nil
}

// profileWindow writes a CPU profile of this process covering win.
func profileWindow(path string, win window) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	var once sync.Once
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-time.After(time.Until(win.from)):
		case <-done:
			_ = f.Close()
			return
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return
		}
		select {
		case <-time.After(time.Until(win.to)):
		case <-done:
		}
		pprof.StopCPUProfile()
		_ = f.Close()
	}()
	return func() { once.Do(func() { close(done) }); <-finished }, nil
}
