package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// window is the measured part of a phase: [from, to) after the warm-up.
type window struct{ from, to time.Time }

func (w window) has(t time.Time) bool { return !t.Before(w.from) && t.Before(w.to) }

// result is one phase's figures.
type result struct {
	name   string
	conc   int
	window time.Duration
	ops    int
	errs   int
	errMsg string
	// latency samples of operations that completed inside the window
	create, e2e, server []time.Duration
	polls               int           // tasks/get calls made by the counted tasks
	waits               int           // waits before a tasks/get (none before fetching a terminal handle)
	pollWait            time.Duration // the waits, in total
	inline              int           // tasks whose tools/call answered with the result
	cpu                 map[string]float64
	noRate              bool  // paced phase: its ops/s says nothing
	redisCmds           int64 // asynq: Redis commands processed over the window (INFO stats; -1: unknown)
}

func (r *result) rate() float64 {
	if r == nil || r.window <= 0 {
		return 0
	}
	return float64(r.ops) / r.window.Seconds()
}

// recorder collects samples from many goroutines.
type recorder struct {
	mu  sync.Mutex
	res *result
	win window
}

func newRecorder(name string, conc int, win window) *recorder {
	return &recorder{res: &result{name: name, conc: conc, window: win.to.Sub(win.from)}, win: win}
}

type sample struct {
	create, e2e, server time.Duration
	created             time.Time     // when the create answer came (zero: when the operation ended)
	polls, waits        int           // tasks/get calls, and the waits before them
	pollWait            time.Duration // waited before the polls, in total
	inline              bool          // tools/call answered with the result
}

// done records an operation that completed at t: its create latency if
// the create answer came inside the window (as the ceiling's createDone),
// the rest if t is in the window.
func (r *recorder) done(t time.Time, s sample) {
	created := s.created
	if created.IsZero() {
		created = t
	}
	createIn, doneIn := s.create > 0 && r.win.has(created), r.win.has(t)
	if !createIn && !doneIn {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if createIn {
		r.res.create = append(r.res.create, s.create)
	}
	if !doneIn {
		return
	}
	r.res.ops++
	if s.e2e > 0 {
		r.res.e2e = append(r.res.e2e, s.e2e)
	}
	if s.server > 0 {
		r.res.server = append(r.res.server, s.server)
	}
	r.res.polls += s.polls
	r.res.waits += s.waits
	r.res.pollWait += s.pollWait
	if s.inline {
		r.res.inline++
	}
}

// createDone records a create latency alone (the ceiling's producer side).
func (r *recorder) createDone(t time.Time, d time.Duration) {
	if !r.win.has(t) {
		return
	}
	r.mu.Lock()
	r.res.create = append(r.res.create, d)
	r.mu.Unlock()
}

// fail counts an error (whenever it happened: errors are never expected).
func (r *recorder) fail(err error) {
	r.mu.Lock()
	r.res.errs++
	if r.res.errMsg == "" {
		r.res.errMsg = err.Error()
	}
	r.mu.Unlock()
}

func (r *recorder) result() *result {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range [][]time.Duration{r.res.create, r.res.e2e, r.res.server} {
		slices.Sort(s)
	}
	return r.res
}

// pct is the nearest-rank percentile of sorted samples.
func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return -1
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// ---- CPU accounting from /proc ----

const clkTck = 100 // USER_HZ on Linux

// cpuSnap is CPU time used so far by each watched process and by the whole
// machine (busy time of all CPUs), in seconds.
type cpuSnap struct {
	at    time.Time
	procs map[string]float64
	total float64
}

func procCPU(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// after the command: state(3) ... utime(14) stime(15), 1-based in the full line
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / clkTck, true
}

func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var busy float64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is already in user
			break
		}
		x, _ := strconv.ParseFloat(v, 64)
		busy += x
	}
	return busy / clkTck
}

func snapCPU(pids map[string]int) cpuSnap {
	s := cpuSnap{at: time.Now(), procs: map[string]float64{}, total: machineBusy()}
	for name, pid := range pids {
		if v, ok := procCPU(pid); ok {
			s.procs[name] = v
		}
	}
	return s
}

// cpuPercent turns two snapshots into % of one core per process, plus
// "other": everything else the machine ran meanwhile.
func cpuPercent(a, b cpuSnap) map[string]float64 {
	wall := b.at.Sub(a.at).Seconds()
	out := map[string]float64{}
	if wall <= 0 {
		return out
	}
	ours := 0.0
	for name, v := range b.procs {
		d := v - a.procs[name]
		out[name] = 100 * d / wall
		ours += d
	}
	if b.total > 0 {
		out["other"] = max(0, 100*(b.total-a.total-ours)/wall)
	}
	return out
}

// cpuWatch takes a snapshot when the window opens and one when it closes.
type cpuWatch struct {
	done chan struct{}
	pct  map[string]float64
}

func watchCPU(pids map[string]int, win window) *cpuWatch {
	w := &cpuWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		time.Sleep(time.Until(win.from))
		a := snapCPU(pids)
		time.Sleep(time.Until(win.to))
		w.pct = cpuPercent(a, snapCPU(pids))
	}()
	return w
}

func (w *cpuWatch) wait() map[string]float64 { <-w.done; return w.pct }
