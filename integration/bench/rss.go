package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/procs"
)

// The rss phase (--phase rss) checks that the api keeps no per-task state:
// C clients run tasks of --tool through the task path (tools/call, tasks/get
// until completed, or the result inline) and the api's resident set is read from /proc when
// --rss-first and then --rss-tasks tasks have completed, each time after the
// load stopped and the api had --rss-settle to go idle. Nothing is forced
// (no GC call, no FreeOSMemory): the figures are what the kernel reports.

// rssPoint is one reading.
type rssPoint struct {
	tasks          int
	apiKiB, wrkKiB int64
	apiHWM         int64
	took           time.Duration
}

type rssRun struct {
	points []rssPoint
	errs   int
	errMsg string
}

// vmKiB reads a "VmRSS:"-style field of /proc/<pid>/status in KiB.
func vmKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// runRSS drives tasks until each of the targets (ascending) is reached and
// reads the RSS of api and worker at each.
func runRSS(ctx context.Context, c *config, cli *mcp, api, worker *proc) (*rssRun, error) {
	out := &rssRun{}
	var done atomic.Int64
	var mu sync.Mutex
	start := time.Now()
	for _, target := range []int{c.rssFirst, c.rssTasks} {
		logf("rss: driving the task path to %d completed tasks", target)
		var wg sync.WaitGroup
		for range c.conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil && done.Load() < int64(target) {
					if _, err := cli.taskOnce(ctx, c.call, c.poll); err != nil {
						if ctx.Err() != nil {
							return
						}
						mu.Lock()
						out.errs++
						if out.errMsg == "" {
							out.errMsg = err.Error()
						}
						mu.Unlock()
						_ = procs.Sleep(ctx, 10*time.Millisecond)
						continue
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, p := range []*proc{api, worker} {
			if err := p.gone(); err != nil {
				return nil, err
			}
		}
		took := time.Since(start)
		if err := procs.Sleep(ctx, c.rssSettle); err != nil {
			return nil, err
		}
		pt := rssPoint{tasks: int(done.Load()), took: took}
		var err error
		if pt.apiKiB, err = vmKiB(api.Pid(), "VmRSS"); err != nil {
			return nil, err
		}
		if pt.apiHWM, err = vmKiB(api.Pid(), "VmHWM"); err != nil {
			return nil, err
		}
		if pt.wrkKiB, err = vmKiB(worker.Pid(), "VmRSS"); err != nil {
			return nil, err
		}
		logf("rss: %d tasks: api VmRSS %d KiB (peak %d KiB), worker %d KiB", pt.tasks, pt.apiKiB, pt.apiHWM, pt.wrkKiB)
		out.points = append(out.points, pt)
	}
	return out, nil
}

func printRSS(w io.Writer, c *config, name string, r *rssRun) {
	fmt.Fprintf(w, "\n== %s: api memory as tasks accumulate (task path, %d clients, read %s after the load stops) ==\n", name, c.conc, c.rssSettle)
	fmt.Fprintf(w, "%12s %10s %14s %16s %16s\n", "completed", "after", "api VmRSS MiB", "api VmHWM MiB", "worker VmRSS MiB")
	for _, p := range r.points {
		fmt.Fprintf(w, "%12d %9.0fs %14.1f %16.1f %16.1f\n", p.tasks, p.took.Seconds(), float64(p.apiKiB)/1024, float64(p.apiHWM)/1024, float64(p.wrkKiB)/1024)
	}
	if len(r.points) == 2 && r.points[0].apiKiB > 0 {
		ratio := float64(r.points[1].apiKiB) / float64(r.points[0].apiKiB)
		verdict := "within 10%"
		if ratio > 1.10 || ratio < 0.90 {
			verdict = "NOT within 10%"
		}
		fmt.Fprintf(w, "api VmRSS at %d ÷ at %d tasks = %.3f (%s)\n", r.points[1].tasks, r.points[0].tasks, ratio, verdict)
	}
	if r.errs > 0 {
		fmt.Fprintf(w, "errors: %d, first: %s\n", r.errs, r.errMsg)
	}
}
