package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/producer"
)

// The history phase (--phase history) checks that what a task costs the api,
// and what a reaper pass costs, do not grow with the finished records the
// store retains (issue #29). For each --history-records count N it fills a
// store of its own (prefix <prefix>h<i>) with N terminal records of one
// principal, plus --history-active tasks of that principal in flight (a
// live worker lease, so the reaper reads them and leaves them be), written
// straight through the store's own Create and Update (fill.go). Then an api
// with authentication on (HS256 tokens, that principal's) and a worker run
// on each store, and in --history-rounds rounds, the counts one after the
// other in each round (ascending in even rounds, descending in odd ones, so
// a drift of the machine's load weighs on both alike):
//
//   - C clients run the task path for --duration after --warmup: api CPU µs
//     per task from /proc/<pid>/stat;
//   - historyPasses reaper passes (producer.ReapOnce) run in the bench
//     process on the same store: CPU per pass from getrusage, wall time per
//     pass, and the broker's CPU meanwhile.
//
// The medians over the rounds are compared, the largest count's ÷ the
// smallest's. The apis run with --task-ttl 10s, so the measured tasks do not
// pile up beside the filled history (the filled records are kept 2 h). On
// Asynq each count has a redis-server of its own (one system's Redis holds
// its own records), unless --redis names one.

// historyPasses is how many reaper passes a round times per store.
const historyPasses = 200

// Who the filled records belong to and who calls: the api trusts HS256
// tokens of historyIssuer signed with a key the bench writes.
const (
	historyIssuer  = "https://issuer.bench.invalid"
	historySubject = "bench-principal"
)

// historySet is one retained-record count: its store, processes, figures.
type historySet struct {
	records int
	prefix  string
	be      *backend.Backend
	prod    *producer.Producer
	fill    time.Duration
	sys     *histSystem
	// startCPU is the api's CPU from its start until it went quiet: its
	// first reaper pass reads every record once (the stores' index repair).
	startCPU float64
	first    reapFigures   // the first pass of a fresh store connection
	loads    []*result     // the task path, per round
	reaps    []reapFigures // per round
	apiKiB   int64
	// beArgs and brokerPid reach this set's broker: on Asynq a
	// redis-server of its own per count, unless --redis named one
	beArgs    []string
	brokerPid int
}

// historyRun is the phase's outcome on one backend.
type historyRun struct {
	sets []*historySet
	// profile names the file of a CPU profile (with --pprof)
	profile func(what string) string
	conc    int
}

// parseCounts parses --history-records: ascending counts ≥ 0, at least two.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--history-records %q: want comma-separated counts ≥ 0 such as 1000,1000000", s)
		}
		out = append(out, n)
	}
	for i := 1; i < len(out); i++ {
		if out[i] <= out[i-1] {
			return nil, fmt.Errorf("--history-records %q: want ascending counts", s)
		}
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("--history-records %q: want at least two counts to compare", s)
	}
	return out, nil
}

// runHistory is --phase history on one backend: opts and beArgs reach its
// broker, prefix is the run's.
func runHistory(ctx context.Context, c *config, b *bins, opts cli.Options, beArgs []string, prefix string, pids map[string]int, cl *cleanup) (*historyRun, error) {
	key, keyFile, err := historyToken(b.dir)
	if err != nil {
		return nil, err
	}
	out := &historyRun{conc: c.conc, profile: func(what string) string {
		if c.pprofDir == "" {
			return ""
		}
		return filepath.Join(c.pprofDir, opts.Broker+"-"+what+".pprof")
	}}
	defer func() {
		for _, s := range out.sets {
			if s.sys != nil {
				s.sys.stop()
			}
			if s.be != nil {
				s.be.Close()
			}
		}
	}()
	for i, n := range c.historyCounts {
		s := &historySet{records: n, prefix: fmt.Sprintf("%sh%d", prefix, i), beArgs: beArgs, brokerPid: pids["broker"]}
		out.sets = append(out.sets, s)
		o := opts
		if opts.Broker == "asynq" && !c.redisGiven && i > 0 {
			// One system's Redis holds its own records only.
			if o.Redis.URL, s.brokerPid, err = startPrivateRedis(ctx, cl); err != nil {
				return nil, err
			}
			s.beArgs = slices.Clone(beArgs)
			s.beArgs[slices.Index(s.beArgs, "--redis")+1] = o.Redis.URL
		}
		if opts.Broker == "asynq" && c.redisGiven {
			dropPrefix(cl, c.redisURL, s.prefix)
		}
		o.Prefix = s.prefix
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s.be, err = o.Connect(cctx, "bench-history", zerolog.Nop())
		cancel()
		if err != nil {
			return nil, err
		}
		s.prod = producer.New(s.be.Store, producer.QueueExecutor{Queue: s.be.Queue, Bus: s.be.Bus}, &producer.Config{Logger: zerolog.Nop()})
		logf("history: filling %s with %d terminal records and %d in flight", s.prefix, n, c.historyActive)
		if s.fill, err = fillHistory(ctx, s.be.Store, historyOwner(), c.call.name, n, c.historyActive); err != nil {
			return nil, fmt.Errorf("fill %d: %w", n, err)
		}
		logf("history: %d records in %s (%.0f records/s)", n, s.fill.Round(100*time.Millisecond), float64(n)/max(s.fill.Seconds(), 1e-3))
		// The first pass of a fresh connection repairs the index from
		// every record (once per Store); the api's first pass does the same.
		if s.first, err = timeReaper(ctx, s.prod, 1, s.brokerPid); err != nil {
			return nil, err
		}
		logf("history: %d records: first reaper pass %s wall, %s CPU", n, s.first.wall, s.first.cpu)
	}
	for _, s := range out.sets {
		if s.sys, err = startSystem(ctx, c, b, s.beArgs, s.prefix, keyFile, key, cl); err != nil {
			return nil, err
		}
	}
	for _, s := range out.sets {
		if s.startCPU, err = s.sys.waitQuiet(ctx); err != nil {
			return nil, err
		}
		logf("history: %d records: api quiet after start, %.2f s CPU since start", s.records, s.startCPU)
	}
	if err := historyRounds(ctx, c, out, pids); err != nil {
		return nil, err
	}
	for _, s := range out.sets {
		if s.apiKiB, err = vmKiB(s.sys.api.Pid(), "VmRSS"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// historyRounds runs the rounds: in each, the task path and then the
// reaper on every set, the counts one after the other.
func historyRounds(ctx context.Context, c *config, out *historyRun, pids map[string]int) error {
	for round := range c.historyRounds {
		sets := slices.Clone(out.sets)
		if round%2 == 1 {
			slices.Reverse(sets)
		}
		for _, s := range sets {
			logf("history: round %d/%d, %d records: task path, %d clients", round+1, c.historyRounds, s.records, c.conc)
			p := map[string]int{"api": s.sys.api.Pid(), "worker": s.sys.worker.Pid(), "broker": s.brokerPid, "bench": pids["bench"]}
			begin := time.Now()
			w := window{from: begin.Add(c.warmup), to: begin.Add(c.warmup + c.duration)}
			wait := func() {}
			if round == 0 && s.sys.pprof != "" {
				wait = profileProcs(ctx, map[string]string{"api": s.sys.pprof}, w, out.profile)(fmt.Sprintf("history-%d", s.records))
			}
			res, err := drive(ctx, fmt.Sprintf("%d records", s.records), c.conc, w, p, s.sys.cli.taskOp(c.call, c.poll))
			wait()
			if err != nil {
				return err
			}
			if err := s.sys.alive(); err != nil {
				return err
			}
			if res.ops == 0 {
				return fmt.Errorf("%d records: no task completed in the window (%d errors, first: %s)", s.records, res.errs, res.errMsg)
			}
			s.loads = append(s.loads, res)
			logf("history: %d records: %.0f tasks/s, api %.0f µs/task, %d errors", s.records, res.rate(), perTask(res, "api"), res.errs)
		}
		for _, s := range sets {
			f, err := timeReaper(ctx, s.prod, historyPasses, s.brokerPid)
			if err != nil {
				return err
			}
			s.reaps = append(s.reaps, f)
			logf("history: %d records: reaper %s CPU, %s wall per pass (%d active)", s.records, f.cpuPerPass(), f.wallPerPass(), f.active)
		}
	}
	return nil
}

// perTask is proc's CPU µs per completed task of res.
func perTask(res *result, proc string) float64 {
	if res == nil || res.ops == 0 {
		return 0
	}
	return res.cpu[proc] / 100 * res.window.Seconds() / float64(res.ops) * 1e6
}

// historyOwner is the owner key of the calling principal.
func historyOwner() string {
	return auth.Principal{Issuer: historyIssuer, Subject: historySubject}.Owner()
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
