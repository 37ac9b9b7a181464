package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/procs"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// fillWriters is how many goroutines write the history at once.
const fillWriters = 128

// historyKeep is the TTL of the filled terminal records and the lease of
// the filled tasks in flight: longer than any run of the phase.
const historyKeep = 2 * time.Hour

// fillResult is what a filled terminal record holds: a small tool result.
var fillResult = json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)

// fillHistory writes n terminal records of owner (tool tool) into st, and
// active ones held by a worker whose lease lasts historyKeep, through the
// store's own write path as api and worker write them: Create (working),
// then for the terminal ones Update (completed, its TTL counted from there).
// It returns how long the n terminal records took.
func fillHistory(ctx context.Context, st taskstate.Store, owner, tool string, n, active int) (time.Duration, error) {
	var next atomic.Int64
	var first error
	var once sync.Once
	fail := func(err error) { once.Do(func() { first = err }) }
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	began := time.Now()
	var wg sync.WaitGroup
	for range fillWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n+active) && ctx.Err() == nil; i = next.Add(1) {
				if err := fillOne(ctx, st, owner, tool, i <= int64(n)); err != nil {
					fail(err)
					cancel()
				}
				if i%100_000 == 0 {
					logf("history: %d of %d records written", i, n+active)
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return time.Since(began), ctx.Err()
}

// fillTries is how often a write of the fill is tried: a broker this busy
// may let a write time out (one that may have landed: see fillOne).
const fillTries = 5

// fillOne writes one record: terminal, or in flight under a live lease.
func fillOne(ctx context.Context, st taskstate.Store, owner, tool string, terminal bool) error {
	now := time.Now().UTC()
	t := &taskstate.Task{
		ID: taskstate.NewID(), Kind: taskstate.KindTool, Tool: tool, Arguments: json.RawMessage(`{}`), Owner: owner,
		Era: taskstate.Era20260728, Mode: taskstate.ModeTask, Status: taskstate.Working,
		CreatedAt: now, LastUpdatedAt: now, TTLMs: historyKeep.Milliseconds(), Attempt: 1,
	}
	if !terminal {
		t.Lease = &taskstate.Lease{Worker: "bench-history", Expires: now.Add(historyKeep)}
	}
	err := st.Create(ctx, t)
	for try := 1; err != nil && try < fillTries && ctx.Err() == nil; try++ {
		if err = st.Create(ctx, t); errors.Is(err, taskstate.ErrExists) {
			// The write that timed out landed; its revision is unknown.
			if !terminal {
				return nil
			}
			return finishFill(ctx, st, t.ID)
		}
	}
	if err != nil || !terminal {
		return err
	}
	t.Status, t.Result, t.LastUpdatedAt = taskstate.Completed, fillResult, time.Now().UTC()
	if err := st.Update(ctx, t); err == nil {
		return nil
	}
	return finishFill(ctx, st, t.ID)
}

// finishFill completes the record id after a write that failed (and may
// have landed), reading it first.
func finishFill(ctx context.Context, st taskstate.Store, id string) error {
	var err error
	for range fillTries {
		_, err = taskstate.Mutate(ctx, st, id, time.Now, func(t *taskstate.Task) error {
			if t.Status.Terminal() {
				return taskstate.ErrSkip
			}
			t.Status, t.Result = taskstate.Completed, fillResult
			return nil
		})
		if err == nil || errors.Is(err, taskstate.ErrSkip) || ctx.Err() != nil {
			return nil
		}
	}
	return err
}

// dropPrefix removes the Redis keys of prefix at the end (a --redis the
// bench did not start outlives the run).
func dropPrefix(cl *cleanup, url, prefix string) {
	cl.add("drop Redis keys "+prefix, func() {
		n, err := dropRedisKeys(url, prefix)
		if err != nil {
			logf("asynq: removing Redis keys under %s: %v", prefix, err)
			return
		}
		logf("asynq: removed %d Redis keys under %s", n, prefix)
	})
}

// startPrivateRedis runs a redis-server of the bench's own on a free
// loopback port, without persistence, until cleanup: a million records do
// not belong in a Redis other programs use. It returns its URL and pid.
func startPrivateRedis(ctx context.Context, cl *cleanup) (string, int, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", 0, errors.New("--phase history on asynq starts a redis-server of its own: none on PATH (Debian: apt-get install redis-server), or give --redis")
	}
	port, err := procs.FreePort()
	if err != nil {
		return "", 0, err
	}
	dir, err := os.MkdirTemp("", "mcpq-bench-redis-")
	if err != nil {
		return "", 0, err
	}
	p, err := start("redis-server", bin, nil, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no")
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", 0, err
	}
	stop := cl.add("stop redis-server", func() { p.Stop(5 * time.Second); _ = os.RemoveAll(dir) })
	if err := p.waitOutput(ctx, "Ready to accept connections", 20*time.Second); err != nil {
		stop()
		return "", 0, err
	}
	return fmt.Sprintf("redis://127.0.0.1:%d/0", port), p.Pid(), nil
}

// setHistory checks the history flags and parses --history-records.
func (c *config) setHistory(fs *flag.FlagSet, records string) error {
	var err error
	if c.historyCounts, err = parseCounts(records); err != nil {
		return err
	}
	if c.historyActive < 0 || c.historyRounds < 1 {
		return errors.New("--history-active ≥ 0, --history-rounds ≥ 1")
	}
	fs.Visit(func(f *flag.Flag) { c.redisGiven = c.redisGiven || f.Name == "redis" })
	c.redisGiven = c.redisGiven || os.Getenv("MCPQ_TEST_REDIS") != ""
	return nil
}

// historyRedis points --phase history on asynq at a redis-server of the
// bench's own unless --redis (or MCPQ_TEST_REDIS) named one.
func (c *config) historyRedis(ctx context.Context, cl *cleanup) error {
	if c.phase != "history" || c.redisGiven || !slices.Contains(c.brokers, "asynq") {
		return nil
	}
	url, _, err := startPrivateRedis(ctx, cl)
	if err != nil {
		return err
	}
	logf("history: a redis-server of its own at %s", url)
	c.redisURL = url
	return nil
}
