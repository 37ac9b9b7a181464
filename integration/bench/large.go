package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/procs"
)

// The large phase (--phase large) measures what serving large results costs
// the api: --large-tasks tasks of the demo's blob tool, each a result of
// --large-bytes, are completed first; then that many clients fetch them
// with tasks/get, back to back, for --duration. The api's resident set is
// read every 50 ms meanwhile; the results live in the store's blobs and
// tasks/get streams them, so the api should hold a chunk per reply, not the
// whole of each.

type largeRun struct {
	tasks, bytes int
	served       int64
	took         time.Duration
	idleKiB      int64
	peakKiB      int64
	hwmKiB       int64
	errs         int
	errMsg       string
}

func runLarge(ctx context.Context, c *config, cli *mcp, api *proc) (*largeRun, error) {
	out := &largeRun{tasks: c.largeTasks, bytes: c.largeBytes}
	ids := make([]string, c.largeTasks)
	for i := range ids {
		var h struct {
			TaskID string `json:"taskId"`
		}
		params := fmt.Sprintf(`"name":"blob","arguments":{"bytes":%d}`, c.largeBytes)
		if _, err := cli.call(ctx, "tools/call", "blob", params, true, &h); err != nil {
			return nil, fmt.Errorf("large: tools/call blob: %w", err)
		}
		ids[i] = h.TaskID
	}
	for _, id := range ids {
		for {
			var tk struct {
				Status string `json:"status"`
			}
			if _, err := cli.call(ctx, "tasks/get", id, fmt.Sprintf(`"taskId":%q`, id), true, &tk); err != nil {
				return nil, fmt.Errorf("large: tasks/get: %w", err)
			}
			if tk.Status == "completed" {
				break
			}
			if tk.Status == "failed" || tk.Status == "cancelled" {
				return nil, fmt.Errorf("large: task %s %s", id, tk.Status)
			}
			if err := procs.Sleep(ctx, 100*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
	if err := procs.Sleep(ctx, c.rssSettle); err != nil {
		return nil, err
	}
	var err error
	if out.idleKiB, err = vmKiB(api.Pid(), "VmRSS"); err != nil {
		return nil, err
	}
	logf("large: %d results of %d bytes stored; api VmRSS %d KiB; %d clients fetching for %s", len(ids), c.largeBytes, out.idleKiB, len(ids), c.duration)
	stop := make(chan struct{})
	var peak atomic.Int64
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if v, err := vmKiB(api.Pid(), "VmRSS"); err == nil && v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	})
	var served atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	begin := time.Now()
	for _, id := range ids {
		wg.Go(func() {
			for time.Since(begin) < c.duration && ctx.Err() == nil {
				var tk struct {
					Result json.RawMessage `json:"result"`
				}
				raw, err := cli.call(ctx, "tasks/get", id, fmt.Sprintf(`"taskId":%q`, id), true, &tk)
				if err == nil && len(tk.Result) < c.largeBytes {
					err = fmt.Errorf("a %d-byte result for a %d-byte blob", len(tk.Result), c.largeBytes)
				}
				if err != nil {
					mu.Lock()
					out.errs++
					if out.errMsg == "" {
						out.errMsg = err.Error()
					}
					mu.Unlock()
					continue
				}
				served.Add(int64(len(raw)))
			}
		})
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	out.took = time.Since(begin)
	out.served = served.Load()
	out.peakKiB = peak.Load()
	out.hwmKiB, _ = vmKiB(api.Pid(), "VmHWM")
	return out, ctx.Err()
}

func printLarge(w io.Writer, name string, r *largeRun) {
	fmt.Fprintf(w, "\n== %s: the api serving large results (tasks/get, %d clients, one %d-byte result each) ==\n", name, r.tasks, r.bytes)
	mib := func(kib int64) float64 { return float64(kib) / 1024 }
	fmt.Fprintf(w, "  served %.0f MiB in %.1fs (%.0f MiB/s), %d errors%s\n", float64(r.served)/(1<<20), r.took.Seconds(),
		float64(r.served)/(1<<20)/r.took.Seconds(), r.errs, map[bool]string{true: ": " + r.errMsg, false: ""}[r.errs > 0])
	fmt.Fprintf(w, "  api VmRSS: %.1f MiB before, %.1f MiB peak while serving (VmHWM %.1f MiB); results in flight: %d × %.1f MiB = %.1f MiB\n",
		mib(r.idleKiB), mib(r.peakKiB), mib(r.hwmKiB), r.tasks, float64(r.bytes)/(1<<20), float64(r.tasks*r.bytes)/(1<<20))
}
