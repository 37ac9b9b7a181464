// Command bench measures mcpqueue's throughput and latency on each broker:
// the bare broker lifecycle in-process (the ceiling), then the api and a
// worker as separate processes driven over HTTP through the task path
// (tools/call + tasks/get polling) and the sync path (result inline).
//
//	go run ./integration/bench                      # both brokers, 10s per phase, concurrency 64
//	go run ./integration/bench --broker nats --duration 5s --concurrency 32
//
// See README.md beside this file for what each figure means.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/backend"
)

// pollOnePolicy is how (d) polls: --poll-one's fixed interval, 0 back to back.
func (c *config) pollOnePolicy() pollPolicy { return pollPolicy{every: c.pollOne} }

type config struct {
	brokers    []string
	duration   time.Duration
	warmup     time.Duration
	conc       int
	workerConc int
	poll       pollPolicy
	pollOne    time.Duration
	asynqPoll  time.Duration
	asynqBusy  time.Duration
	logLevel   string
	redisURL   string
	pprofDir   string
	// --phase rss: api memory as tasks accumulate (rss.go) instead of (a)–(e)
	phase              string
	rssFirst, rssTasks int
	// --phase large: the api serving large results (large.go)
	largeTasks, largeBytes int
	rssSettle              time.Duration
}

func main() {
	var c config
	var brokerFlag string
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.StringVar(&brokerFlag, "broker", "both", "backend to measure: nats, asynq or both")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured time per phase (after the warm-up)")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "warm-up before each phase's measurement")
	fs.IntVar(&c.conc, "concurrency", 64, "concurrent clients (task path, sync path) and in-flight tasks (ceiling)")
	fs.IntVar(&c.workerConc, "worker-concurrency", 0, "worker --concurrency (default: --concurrency)")
	c.poll = pollPolicy{server: true}
	fs.Var(&c.poll, "poll", "task path: wait before each tasks/get: server = the pollIntervalMs of the last answer (the create answer for the first), as the official clients do; or a fixed interval such as 2ms")
	fs.DurationVar(&c.pollOne, "poll-one", 0, "task path one at a time (d): interval between tasks/get polls; 0 polls again as soon as an answer says working (one waiting client can afford that; 64 cannot)")
	fs.DurationVar(&c.asynqPoll, "asynq-poll", 100*time.Millisecond, "asynq: --asynq-poll given to api, worker and the ceiling (the binaries' default is 100ms)")
	fs.DurationVar(&c.asynqBusy, "asynq-busy-poll", 2*time.Millisecond, "asynq: --asynq-busy-poll given to api, worker and the ceiling (the binaries' default is 2ms; at least --asynq-poll turns busy polling off)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "--log-level of api and worker (info logs two lines per task)")
	fs.StringVar(&c.redisURL, "redis", defaultRedis(), "asynq: Redis URL (env MCPQ_TEST_REDIS)")
	fs.StringVar(&c.pprofDir, "pprof", "", "write CPU profiles here: the in-process ceiling, and api, worker (built with a pprof overlay) and nats-server during the C-concurrency task and sync phases")
	fs.StringVar(&c.phase, "phase", "all", "all: phases (a)–(e); rss: the api's resident memory after --rss-first and --rss-tasks completed tasks; large: the api's resident memory while clients fetch large results")
	fs.IntVar(&c.largeTasks, "large-tasks", 10, "large: results stored, and clients fetching them at once")
	fs.IntVar(&c.largeBytes, "large-bytes", 20_000_000, "large: the size of each result")
	fs.IntVar(&c.rssFirst, "rss-first", 10000, "rss: first reading after this many completed tasks")
	fs.IntVar(&c.rssTasks, "rss-tasks", 100000, "rss: second reading after this many completed tasks")
	fs.DurationVar(&c.rssSettle, "rss-settle", 5*time.Second, "rss: idle time before each reading")
	_ = fs.Parse(os.Args[1:])
	if c.phase != "all" && c.phase != "rss" && c.phase != "large" || c.rssFirst < 1 || c.rssTasks < c.rssFirst || c.largeTasks < 1 || c.largeBytes < 1 {
		fmt.Fprintln(os.Stderr, "bench: --phase all|rss|large, 1 ≤ --rss-first ≤ --rss-tasks, --large-tasks and --large-bytes ≥ 1")
		os.Exit(2)
	}
	switch brokerFlag {
	case "both":
		c.brokers = []string{"nats", "asynq"}
	case "nats", "asynq":
		c.brokers = []string{brokerFlag}
	default:
		fmt.Fprintf(os.Stderr, "bench: --broker must be nats, asynq or both, not %q\n", brokerFlag)
		os.Exit(2)
	}
	if c.conc < 1 || c.duration <= 0 || c.warmup < 0 || c.pollOne < 0 {
		fmt.Fprintln(os.Stderr, "bench: --concurrency ≥ 1, --duration > 0, --warmup ≥ 0, --poll-one ≥ 0")
		os.Exit(2)
	}
	if c.workerConc <= 0 {
		c.workerConc = c.conc
	}

	cl := &cleanup{}
	ctx, cancel := context.WithCancel(context.Background())
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigc
		fmt.Fprintln(os.Stderr, "\nbench: interrupted; stopping processes and removing Redis keys (Ctrl-C again to hurry)")
		cancel()
		select {
		case <-sigc:
		case <-time.After(30 * time.Second):
		}
		cl.runAll()
		os.Exit(130)
	}()

	err := run(ctx, &c, cl)
	cl.runAll()
	if err != nil {
		if ctx.Err() != nil {
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func defaultRedis() string {
	if u := os.Getenv("MCPQ_TEST_REDIS"); u != "" {
		if !strings.Contains(u, "://") {
			u = "redis://" + u
		}
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// backendRun holds one backend's figures.
type backendRun struct {
	name, desc               string
	ceil, ceilOps            *result
	task, sync, task1, sync1 *result
	syncRand                 *result   // sync, one at a time, randomly timed
	syncQuiet                *result   // sync, one at a time, each after a quiet spell (asynq)
	rss                      *rssRun   // --phase rss
	large                    *largeRun // --phase large
	idle                     *result   // no calls: the cost of waiting for work
	idleCmds                 float64   // asynq: Redis commands/s while idle
	durability               string
	err                      error
}

func run(ctx context.Context, c *config, cl *cleanup) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	printHeader(c, root)
	logf("building api, worker and nats-server…")
	t0 := time.Now()
	b, err := build(ctx, root, c.pprofDir != "", cl)
	if err != nil {
		return err
	}
	logf("built in %s", time.Since(t0).Round(100*time.Millisecond))
	if c.pprofDir != "" {
		if err := os.MkdirAll(c.pprofDir, 0o755); err != nil {
			return err
		}
	}

	var runs []*backendRun
	for _, name := range c.brokers {
		r := runBackend(ctx, c, b, name, cl)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch c.phase {
		case "rss":
			if r.rss != nil {
				printRSS(os.Stdout, c, r.name, r.rss)
			}
		case "large":
			if r.large != nil {
				printLarge(os.Stdout, r.name, r.large)
			}
		default:
			printBackend(os.Stdout, c, r)
		}
		runs = append(runs, r)
	}
	if c.phase == "all" {
		printSummary(os.Stdout, c, runs)
		printNotes(os.Stdout, c, runs)
	}
	for _, r := range runs {
		if r.err != nil {
			return fmt.Errorf("%s: %w", r.name, r.err)
		}
	}
	return nil
}

func printHeader(c *config, root string) {
	cmd := os.Args[0]
	if strings.Contains(cmd, "go-build") || strings.HasSuffix(filepath.Dir(cmd), "/exe") {
		cmd = "go run ./integration/bench"
	}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \t'\"$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		cmd += " " + a
	}
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("mcpqueue bench  %s  host %s\n", time.Now().UTC().Format(time.RFC3339), host)
	fmt.Printf("command:  %s\n", cmd)
	fmt.Printf("machine:  %s/%s, %d CPUs (%s), GOMAXPROCS=%d, %s; load average at start %s\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), runtime.GOMAXPROCS(0), runtime.Version(),
		strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	fmt.Printf("code:     %s\n", gitState(root))
	fmt.Printf("versions: nats-server %s, nats.go %s, asynq %s, go-redis %s\n",
		modVersion("github.com/nats-io/nats-server/v2"), modVersion("github.com/nats-io/nats.go"),
		modVersion("github.com/hibiken/asynq"), modVersion("github.com/redis/go-redis/v9"))
	fmt.Printf("settings: %s measured per phase after a %s warm-up; concurrency %d; worker --concurrency %d; tasks/get polls %s;\n",
		c.duration, c.warmup, c.conc, c.workerConc, c.poll.describe())
	fmt.Printf("          one at a time (d): tasks/get polls %s\n", c.pollOnePolicy().describe())
	fmt.Printf("          api/worker --log-level %s; asynq --asynq-poll %s --asynq-busy-poll %s; tool `noop` {} (TaskOptional, demo worker)\n", c.logLevel, c.asynqPoll, c.asynqBusy)
	if c.pprofDir != "" {
		fmt.Printf("          CPU profiles → %s (profiling perturbs the figures slightly)\n", c.pprofDir)
	}
}

// gitState names the checked-out commit and whether the tree has changes.
func gitState(root string) string {
	rev, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return root + " (not a git checkout)"
	}
	st, _ := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output()
	s := root + " at " + strings.TrimSpace(string(rev))
	if n := len(strings.Fields(string(st))) / 2; n > 0 {
		s += fmt.Sprintf(" + uncommitted changes in %d tracked files", n)
	}
	return s
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func modVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "?"
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return "?"
}

func randomPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "mcpqbench" + hex.EncodeToString(b[:])
}

// runBackend runs every phase on one backend and tears it down.
func runBackend(ctx context.Context, c *config, b *bins, name string, cl *cleanup) *backendRun {
	r := &backendRun{name: name}
	r.err = func() error {
		prefix := randomPrefix()
		var beArgs []string
		pids := map[string]int{"bench": os.Getpid()}
		opts := backend.Options{Broker: name, Prefix: prefix, AsynqPoll: c.asynqPoll, AsynqBusyPoll: c.asynqBusy, RedisURL: c.redisURL}
		natsProfile := ""
		switch name {
		case "nats":
			pp := 0
			if c.pprofDir != "" {
				pp, _ = freePort()
				natsProfile = fmt.Sprintf("http://127.0.0.1:%d", pp)
			}
			url, p, stop, err := startNATS(ctx, b, pp, cl)
			if err != nil {
				return err
			}
			defer stop()
			opts.NATSURL = url
			beArgs = []string{"--broker", "nats", "--nats", url}
			pids["broker"] = p.pid()
			r.desc = "NATS JetStream work queue + KV (nats-server " + modVersion("github.com/nats-io/nats-server/v2") + ", file storage, separate process)"
			r.durability = "JetStream file storage (default sync: fsync every 2 min, not per write)"
		case "asynq":
			pid, dur, ver, err := redisInfo(ctx, c.redisURL)
			if err != nil {
				return fmt.Errorf("Redis at %s: %w", c.redisURL, err)
			}
			pids["broker"] = pid
			beArgs = []string{"--broker", "asynq", "--redis", c.redisURL, "--asynq-poll", c.asynqPoll.String(), "--asynq-busy-poll", c.asynqBusy.String()}
			r.desc = "Asynq queue + Redis records (redis-server " + ver + " at " + strings.TrimPrefix(c.redisURL, "redis://") + ")"
			r.durability = dur
			for _, p := range []string{prefix, prefix + "c1", prefix + "c2"} {
				drop := cl.add("drop Redis keys "+p, func() {
					n, err := dropRedisKeys(c.redisURL, p)
					if err != nil {
						logf("asynq: removing Redis keys under %s: %v", p, err)
						return
					}
					logf("asynq: removed %d Redis keys under %s", n, p)
				})
				defer drop()
			}
		}
		prof := func(what string) string {
			if c.pprofDir == "" {
				return ""
			}
			return filepath.Join(c.pprofDir, name+"-"+what+".pprof")
		}

		if err := ceilings(ctx, c, r, opts, prefix, pids, prof); err != nil {
			return err
		}
		return r.measureProcs(ctx, c, b, beArgs, prefix, pids, natsProfile, prof, cl)
	}()
	return r
}

// ceilings runs (a) and (a′) in-process, before any api or worker runs.
func ceilings(ctx context.Context, c *config, r *backendRun, opts backend.Options, prefix string, pids map[string]int, prof func(string) string) error {
	if c.phase != "all" {
		return nil
	}
	phase := func(label string) { logf("%s: %s", r.name, label) }
	co := opts
	co.Prefix = prefix + "c1"
	phase(fmt.Sprintf("(a) ceiling, in-process, %d in flight", c.conc))
	res, err := ceiling(ctx, co, "(a)  ceiling: create+enqueue → Next → done+ack", bare, c.conc, c.warmup, c.duration, pids, prof("ceiling"))
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	r.ceil = res
	co.Prefix = prefix + "c2"
	phase("(a′) ceiling with the worker's record operations")
	res, err = ceiling(ctx, co, "(a′) ceiling + worker's record ops", workerOps, c.conc, c.warmup, c.duration, pids, "")
	if err != nil {
		return fmt.Errorf("ceiling with worker ops: %w", err)
	}
	r.ceilOps = res
	return nil
}

// measureProcs starts api and one worker as separate processes and runs
// (b)–(e), or the rss phase, against them.
func (r *backendRun) measureProcs(ctx context.Context, c *config, b *bins, beArgs []string, prefix string, pids map[string]int, natsProfile string, prof func(string) string, cl *cleanup) error {
	name := r.name
	phase := func(label string) { logf("%s: %s", name, label) }
	port, err := freePort()
	if err != nil {
		return err
	}
	var env []string
	targets := map[string]string{}
	if natsProfile != "" {
		targets["nats-server"] = natsProfile
	}
	if c.pprofDir != "" {
		ap, _ := freePort()
		env = []string{fmt.Sprintf("MCPQ_BENCH_PPROF=127.0.0.1:%d", ap)}
		targets["api"] = fmt.Sprintf("http://127.0.0.1:%d", ap)
	}
	common := append(append([]string{}, beArgs...), "--prefix", prefix, "--log-json", "--log-level", c.logLevel, "--shutdown-grace", "2s")
	api, err := start("api", b.api, env, append(common, "--listen", fmt.Sprintf("127.0.0.1:%d", port))...)
	if err != nil {
		return err
	}
	stopAPI := cl.add("stop api", func() { api.stop(10 * time.Second) })
	defer stopAPI()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitHealthy(ctx, api, base+"/healthz"); err != nil {
		return err
	}
	env = nil
	if c.pprofDir != "" {
		wp, _ := freePort()
		env = []string{fmt.Sprintf("MCPQ_BENCH_PPROF=127.0.0.1:%d", wp)}
		targets["worker"] = fmt.Sprintf("http://127.0.0.1:%d", wp)
	}
	worker, err := start("worker", b.worker, env, append(common, "--concurrency", fmt.Sprint(c.workerConc))...)
	if err != nil {
		return err
	}
	stopWorker := cl.add("stop worker", func() { worker.stop(10 * time.Second) })
	defer stopWorker()
	cli := newMCP(base, c.conc)
	if err := waitTool(ctx, cli, worker, "noop"); err != nil {
		return err
	}
	pids["api"], pids["worker"] = api.pid(), worker.pid()
	switch c.phase {
	case "rss":
		r.rss, err = runRSS(ctx, c, cli, api, worker)
		return err
	case "large":
		r.large, err = runLarge(ctx, c, cli, api)
		return err
	}

	window := func() window {
		begin := time.Now()
		return window{from: begin.Add(c.warmup), to: begin.Add(c.warmup + c.duration)}
	}
	taskOp := func(ctx context.Context) (sample, error) { return cli.taskOnce(ctx, c.poll) }
	checkAlive := func() error {
		for _, p := range []*proc{api, worker} {
			if p.exited() {
				return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.out.String())
			}
		}
		return nil
	}

	phase(fmt.Sprintf("(b) task path, %d clients", c.conc))
	w := window()
	wait := profileProcs(ctx, targets, w, prof)("task")
	if p := prof("task-bench"); p != "" { // the clients
		stop, err := profileWindow(p, w)
		if err != nil {
			return err
		}
		defer stop()
	}
	if r.task, err = drive(ctx, "(b)  task path: tools/call → tasks/get polls", c.conc, w, pids, taskOp); err != nil {
		return err
	}
	wait()
	if err := checkAlive(); err != nil {
		return err
	}

	phase(fmt.Sprintf("(c) sync path, %d clients", c.conc))
	w = window()
	wait = profileProcs(ctx, targets, w, prof)("sync")
	if r.sync, err = drive(ctx, "(c)  sync path: tools/call, result inline", c.conc, w, pids, cli.syncOnce); err != nil {
		return err
	}
	wait()
	if err := checkAlive(); err != nil {
		return err
	}

	phase("(d) task path, one at a time")
	taskOne := func(ctx context.Context) (sample, error) { return cli.taskOnce(ctx, c.pollOnePolicy()) }
	if r.task1, err = drive(ctx, "(d)  task path, one at a time", 1, window(), pids, taskOne); err != nil {
		return err
	}
	phase("(d) sync path, one at a time")
	if r.sync1, err = drive(ctx, "(d)  sync path, one at a time", 1, window(), pids, cli.syncOnce); err != nil {
		return err
	}
	// Back-to-back calls arrive just after the worker finished the
	// previous one, in step with a polling consumer; randomly timed
	// calls show the pickup a lone caller sees.
	pause := max(200*time.Millisecond, 2*c.asynqPoll)
	phase(fmt.Sprintf("(e) sync path, one at a time, random 0–%s pause between calls", pause))
	randomly := func(ctx context.Context) (sample, error) {
		if err := sleepCtx(ctx, time.Duration(mrand.Int64N(int64(pause)))); err != nil {
			return sample{}, err
		}
		return cli.syncOnce(ctx)
	}
	if r.syncRand, err = drive(ctx, fmt.Sprintf("(e)  sync, one at a time, 0–%s pauses", pause), 1, window(), pids, randomly); err != nil {
		return err
	}
	r.syncRand.noRate = true

	// Those calls come within a second of the previous one, when an Asynq
	// worker is still busy and polls every --asynq-busy-poll; a call after
	// a quiet second meets the idle poll.
	if r.name == "asynq" && c.asynqBusy < c.asynqPoll {
		quiet := time.Second + 50*time.Millisecond // asynqbroker's BusyFor and a margin
		phase(fmt.Sprintf("(e′) sync path, one at a time, %s + random 0–%s pause between calls", quiet, 2*c.asynqPoll))
		afterQuiet := func(ctx context.Context) (sample, error) {
			if err := sleepCtx(ctx, quiet+time.Duration(mrand.Int64N(int64(2*c.asynqPoll)))); err != nil {
				return sample{}, err
			}
			return cli.syncOnce(ctx)
		}
		w := window()
		w.to = w.from.Add(max(c.duration, 15*time.Second))
		if r.syncQuiet, err = drive(ctx, "(e′) sync, one at a time, after a quiet second", 1, w, pids, afterQuiet); err != nil {
			return err
		}
		r.syncQuiet.noRate = true
	}

	// Waiting for work is not free when the consumer polls.
	phase("(f) idle: no calls")
	w = window()
	cpu := watchCPU(pids, w)
	if err := sleepCtx(ctx, time.Until(w.from)); err != nil {
		return err
	}
	cmds0, _ := redisCommands(ctx, c.redisURL, name)
	if err := sleepCtx(ctx, time.Until(w.to)); err != nil {
		return err
	}
	cmds1, _ := redisCommands(ctx, c.redisURL, name)
	r.idle = &result{name: "(f)  idle: no calls", window: w.to.Sub(w.from), noRate: true, cpu: cpu.wait()}
	if cmds1 > cmds0 {
		r.idleCmds = float64(cmds1-cmds0) / w.to.Sub(w.from).Seconds()
	}
	return checkAlive()
}

// redisCommands is Redis's count of commands processed so far (asynq only).
func redisCommands(ctx context.Context, url, broker string) (int64, error) {
	if broker != "asynq" {
		return 0, nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return 0, err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	info, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "total_commands_processed:"); ok {
			var n int64
			_, err := fmt.Sscan(v, &n)
			return n, err
		}
	}
	return 0, errors.New("no total_commands_processed in INFO stats")
}

func redisInfo(ctx context.Context, url string) (pid int, durability, version string, err error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return 0, "", "", err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0, "", "", err
	}
	for _, l := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), ":")
		switch k {
		case "process_id":
			fmt.Sscan(v, &pid)
		case "redis_version":
			version = v
		}
	}
	get := func(k string) string {
		m, err := rdb.ConfigGet(ctx, k).Result()
		if err != nil {
			return "?"
		}
		return m[k]
	}
	aof, save, fsync := get("appendonly"), strings.TrimSpace(get("save")), get("appendfsync")
	switch {
	case aof == "yes":
		durability = "Redis AOF on (appendfsync " + fsync + ")"
	case save != "":
		durability = "Redis RDB snapshots only (save " + save + "), no AOF"
	default:
		durability = "Redis with no persistence (appendonly no, save \"\"): memory only"
	}
	return pid, durability, version, nil
}

func waitHealthy(ctx context.Context, p *proc, url string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		if p.exited() {
			return fmt.Errorf("api exited: %v\n%s", p.err, p.out.String())
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("api not healthy within 20s:\n%s", p.out.String())
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// waitTool waits until the worker's tools are in the catalog the api reads.
func waitTool(ctx context.Context, cli *mcp, p *proc, tool string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		if p.exited() {
			return fmt.Errorf("worker exited: %v\n%s", p.err, p.out.String())
		}
		raw, err := cli.call(ctx, "tools/list", "", "", false, nil)
		if err == nil && strings.Contains(string(raw), `"name":"`+tool+`"`) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tool %q not listed within 20s (last error %v):\n%s", tool, err, p.out.String())
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// profileProcs returns a starter that fetches a CPU profile covering win
// from each target (a net/http/pprof base URL) into prof(phase-target);
// the function it returns waits for the downloads.
func profileProcs(ctx context.Context, targets map[string]string, win window, prof func(string) string) func(phase string) func() {
	return func(phase string) func() {
		if len(targets) == 0 || prof("") == "" {
			return func() {}
		}
		var wg sync.WaitGroup
		secs := max(1, int(win.to.Sub(win.from).Seconds()))
		for name, base := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if sleepCtx(ctx, time.Until(win.from)) != nil {
					return
				}
				path := prof(phase + "-" + name)
				if err := fetchProfile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs), path); err != nil {
					logf("profile %s: %v", name, err)
				}
			}()
		}
		return wg.Wait
	}
}

func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s %s", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
