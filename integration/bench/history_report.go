package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/mcpqueue/mcpqueue/producer"
)

// reapFigures is what some reaper passes cost.
type reapFigures struct {
	passes    int
	active    int           // active records the last pass read
	cpu, wall time.Duration // in total: the bench process's CPU (getrusage), and wall time
	broker    time.Duration // the broker's CPU meanwhile (other clients' work included)
}

func (f reapFigures) cpuPerPass() time.Duration  { return f.cpu / time.Duration(max(f.passes, 1)) }
func (f reapFigures) wallPerPass() time.Duration { return f.wall / time.Duration(max(f.passes, 1)) }
func (f reapFigures) brokerPerPass() time.Duration {
	return f.broker / time.Duration(max(f.passes, 1))
}

// timeReaper runs passes reaper passes (producer.ReapOnce) back to back and
// times them. Nothing else runs in the bench process meanwhile, so its CPU
// is the passes'.
func timeReaper(ctx context.Context, p *producer.Producer, passes, brokerPid int) (reapFigures, error) {
	f := reapFigures{passes: passes}
	b0, _ := procCPU(brokerPid)
	c0, t0 := cpuSelf(), time.Now()
	for range passes {
		st, err := p.ReapOnce(ctx, nil)
		if err != nil {
			return f, err
		}
		f.active = st.Active
	}
	f.wall, f.cpu = time.Since(t0), cpuSelf()-c0
	b1, _ := procCPU(brokerPid)
	f.broker = time.Duration((b1 - b0) * float64(time.Second))
	return f, nil
}

// historyFigures are one set's medians over the rounds.
type historyFigures struct {
	apiUs, workerUs, brokerUs, rate float64
	inline, gets                    float64 // share answered inline, tasks/get per task
	reapCPU, reapWall, reapBroker   float64 // ms per pass
	errs                            int
}

func (s *historySet) figures() historyFigures {
	var f historyFigures
	var api, wrk, brk, rate, cpu, wall, bro, inl, gets []float64
	for _, r := range s.loads {
		api, wrk, brk = append(api, perTask(r, "api")), append(wrk, perTask(r, "worker")), append(brk, perTask(r, "broker"))
		rate = append(rate, r.rate())
		if r.ops > 0 {
			inl, gets = append(inl, float64(r.inline)/float64(r.ops)), append(gets, float64(r.polls)/float64(r.ops))
		}
		f.errs += r.errs
	}
	for _, r := range s.reaps {
		cpu, wall = append(cpu, msOf(r.cpuPerPass())), append(wall, msOf(r.wallPerPass()))
		bro = append(bro, msOf(r.brokerPerPass()))
	}
	f.apiUs, f.workerUs, f.brokerUs, f.rate = median(api), median(wrk), median(brk), median(rate)
	f.reapCPU, f.reapWall, f.reapBroker = median(cpu), median(wall), median(bro)
	f.inline, f.gets = median(inl), median(gets)
	return f
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// historyTolerance: the acceptance wants the largest count within 10% of
// the smallest.
const historyTolerance = 0.10

// verdict is "PASS" when ratio is within historyTolerance of 1.
func verdict(ratio float64) string {
	if math.IsNaN(ratio) || math.IsInf(ratio, 0) || math.Abs(ratio-1) > historyTolerance {
		return "FAIL"
	}
	return "PASS"
}

func printHistory(w io.Writer, c *config, name string, h *historyRun) {
	fmt.Fprintf(w, "\n== %s: cost with history (auth on, one principal; task path %d clients × %s per round; %d reaper passes per round; medians of %d rounds) ==\n",
		name, h.conc, c.duration, historyPasses, c.historyRounds)
	fmt.Fprintf(w, "%10s %8s %9s %9s %9s %9s %8s %7s %9s %9s %9s %9s %11s %11s %9s %8s\n",
		"retained", "fill s", "fill/s", "api", "worker", "broker", "tasks/s", "inline", "gets/task", "reap CPU", "reap wall", "reap brk", "1st pass", "1st pass", "api start", "api RSS")
	fmt.Fprintf(w, "%10s %8s %9s %9s %9s %9s %8s %7s %9s %9s %9s %9s %11s %11s %9s %8s\n",
		"records", "", "records", "µs/task", "µs/task", "µs/task", "", "", "", "ms/pass", "ms/pass", "ms/pass", "CPU ms", "wall ms", "CPU s", "MiB")
	for _, s := range h.sets {
		f := s.figures()
		fmt.Fprintf(w, "%10d %8.1f %9.0f %9.0f %9.0f %9.0f %8.0f %6.0f%% %9.2f %9.3f %9.3f %9.3f %11.1f %11.1f %9.2f %8.1f\n",
			s.records, s.fill.Seconds(), float64(s.records)/max(s.fill.Seconds(), 1e-3), f.apiUs, f.workerUs, f.brokerUs, f.rate, 100*f.inline, f.gets,
			f.reapCPU, f.reapWall, f.reapBroker, msOf(s.first.cpu), msOf(s.first.wall), s.startCPU, float64(s.apiKiB)/1024)
		if f.errs > 0 {
			fmt.Fprintf(w, "%10s %d errors in the task path, the first: %s\n", "", f.errs, firstErr(s.loads))
		}
	}
	lo, hi := h.sets[0], h.sets[len(h.sets)-1]
	a, b := lo.figures(), hi.figures()
	for _, r := range []struct {
		what   string
		hi, lo float64
	}{
		{"api CPU µs per task", b.apiUs, a.apiUs},
		{"reaper CPU per pass", b.reapCPU, a.reapCPU},
		{"reaper wall time per pass", b.reapWall, a.reapWall},
	} {
		ratio := r.hi / r.lo
		fmt.Fprintf(w, "%-26s %d ÷ %d records = %.3f  %s (within %.0f%%)\n", r.what, hi.records, lo.records, ratio, verdict(ratio), 100*historyTolerance)
	}
	fmt.Fprintf(w, "per round, api µs/task:")
	for _, s := range h.sets {
		fmt.Fprintf(w, "  %d:", s.records)
		for _, r := range s.loads {
			fmt.Fprintf(w, " %.0f", perTask(r, "api"))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "in flight during the reaper passes: %d of the principal's tasks (a live lease each); the 1st pass of a fresh store connection reads every record once (index repair)\n", c.historyActive)
}

// firstErr is the first error message of the rounds.
func firstErr(loads []*result) string {
	for _, r := range loads {
		if r.errMsg != "" {
			return r.errMsg
		}
	}
	return ""
}
