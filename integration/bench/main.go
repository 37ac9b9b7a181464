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

	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/internal/procs"
)

// pollOnePolicy is how (d) polls: --poll-one's fixed interval, 0 back to back.
func (c *config) pollOnePolicy() pollPolicy { return pollPolicy{every: c.pollOne} }

// pollAltPolicy is how (b′) polls: the mode --poll did not pick — a fixed
// --poll-fixed interval when --poll follows the server, else the server.
func (c *config) pollAltPolicy() pollPolicy {
	if c.poll.server {
		return pollPolicy{every: c.pollFixed}
	}
	return pollPolicy{server: true}
}

// longPolicy is how (g) polls: as the server suggests.
var longPolicy = pollPolicy{server: true}

type config struct {
	brokers    []string
	duration   time.Duration
	warmup     time.Duration
	conc       int
	workerConc int
	poll       pollPolicy
	pollOne    time.Duration
	pollFixed  time.Duration // (b′)'s interval when --poll is server
	inlineWait time.Duration // api --inline-wait, the bound (g) is held to
	src        string        // --src: the checkout api and worker are built from ("": this one)
	workerKind string        // demo (cmd/worker) or conformance (examples/conformance)
	call       toolCall      // --tool, --tool-args: what (b)–(e) call
	long       toolCall      // --long-tool, --long-args: what (g) calls
	longConc   int
	peerURL    string // --peer-url, or the address of the --peer-bin it starts
	peerBin    string
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
	// --phase history: costs with retained records (history.go)
	historyCounts                []int
	historyActive, historyRounds int
	redisGiven                   bool // --redis or MCPQ_TEST_REDIS named a Redis
}

func main() {
	var c config
	var brokerFlag string
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.StringVar(&brokerFlag, "broker", "both", "backend to measure: nats, asynq or both")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured time per phase (after the warm-up)")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "warm-up before each phase's measurement")
	fs.IntVar(&c.conc, "concurrency", 64, "concurrent clients (task path, sync path) and in-flight tasks (ceiling)")
	fs.IntVar(&c.workerConc, "worker-concurrency", 0, "worker --concurrency (default: the larger of --concurrency and --long-concurrency)")
	fs.StringVar(&c.workerKind, "worker", "demo", "the worker to run: demo (cmd/worker) or conformance (examples/conformance, the conformance suite's fixture tools)")
	var toolName, toolArgs, longName, longArgs string
	fs.StringVar(&toolName, "tool", "noop", "the tool (b)–(e) call")
	fs.StringVar(&toolArgs, "tool-args", "{}", "its arguments, a JSON object")
	fs.StringVar(&longName, "long-tool", "", "(g): a tool that runs longer than --inline-wait (default: wait for the demo worker, slow_compute for conformance)")
	fs.StringVar(&longArgs, "long-args", "", `(g): its arguments (default: {"ms":2000} for wait, {"seconds":2} for slow_compute, else {})`)
	fs.IntVar(&c.longConc, "long-concurrency", 16, "(g): concurrent clients calling the long tool")
	fs.DurationVar(&c.inlineWait, "inline-wait", 30*time.Millisecond, "api --inline-wait: how long a task-capable call of a short tool waits for its result (negative: never); (g) checks create p99 ≤ this + 5ms")
	fs.StringVar(&c.src, "src", "", "build api and worker from this checkout instead (a git worktree of an older commit, for before/after figures); the bench, its clients and the ceiling (a) stay this tree's")
	fs.StringVar(&c.peerURL, "peer-url", "", "after the backends, run (b), (b′) and (d) against this MCP server too (http://host:port/mcp, already running)")
	fs.StringVar(&c.peerBin, "peer-bin", "", "like --peer-url, but start this server binary (MCPKIT_PEER_QUIET=1 PATH --addr 127.0.0.1:<free port>) and stop it at the end")
	c.poll = pollPolicy{server: true}
	fs.Var(&c.poll, "poll", "task path: wait before each tasks/get: server = the pollIntervalMs of the last answer (the create answer for the first), as the official clients do; or a fixed interval such as 2ms")
	fs.DurationVar(&c.pollFixed, "poll-fixed", 5*time.Millisecond, "(b′) with --poll server: its fixed tasks/get interval")
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
	historyRecords := fs.String("history-records", "1000,1000000", "history: retained terminal records of the calling principal, a store filled for each count (ascending; the last is compared with the first)")
	fs.IntVar(&c.historyActive, "history-active", 100, "history: the principal's tasks in flight besides (a live lease each: the reaper reads them)")
	fs.IntVar(&c.historyRounds, "history-rounds", 5, "history: rounds of task path and reaper passes over the counts (medians compared)")
	_ = fs.Parse(os.Args[1:])
	if c.phase != "all" && c.phase != "rss" && c.phase != "large" && c.phase != "history" || c.rssFirst < 1 || c.rssTasks < c.rssFirst || c.largeTasks < 1 || c.largeBytes < 1 {
		fmt.Fprintln(os.Stderr, "bench: --phase all|rss|large|history, 1 ≤ --rss-first ≤ --rss-tasks, --large-tasks and --large-bytes ≥ 1")
		os.Exit(2)
	}
	if err := c.setHistory(fs, *historyRecords); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
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
	if c.conc < 1 || c.duration <= 0 || c.warmup < 0 || c.pollOne < 0 || c.pollFixed <= 0 || c.longConc < 1 || c.inlineWait == 0 {
		fmt.Fprintln(os.Stderr, "bench: --concurrency ≥ 1, --duration > 0, --warmup ≥ 0, --poll-one ≥ 0, --poll-fixed > 0, --long-concurrency ≥ 1, --inline-wait ≠ 0")
		os.Exit(2)
	}
	if err := c.setTools(toolName, toolArgs, longName, longArgs); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := c.checkPeer(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	switch {
	case c.workerConc <= 0:
		c.workerConc = max(c.conc, c.longConc)
	case c.workerConc < c.longConc:
		fmt.Fprintf(os.Stderr, "bench: --worker-concurrency %d < --long-concurrency %d: (g)'s tasks must all run at once\n", c.workerConc, c.longConc)
		os.Exit(2)
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

// setTools checks --worker and builds the tool calls of the rows.
func (c *config) setTools(name, args, longName, longArgs string) error {
	defLong, defArgs := "wait", `{"ms":2000}`
	switch c.workerKind {
	case "demo":
	case "conformance":
		defLong, defArgs = "slow_compute", `{"seconds":2}`
		if c.phase == "large" {
			return errors.New("--phase large calls the demo worker's blob tool: use --worker demo")
		}
	default:
		return fmt.Errorf("--worker must be demo or conformance, not %q", c.workerKind)
	}
	if longName == "" {
		longName = defLong
	}
	if longArgs == "" {
		longArgs = "{}"
		if longName == defLong {
			longArgs = defArgs
		}
	}
	var err error
	if c.call, err = newToolCall(name, args); err != nil {
		return fmt.Errorf("--tool/--tool-args: %w", err)
	}
	if c.long, err = newToolCall(longName, longArgs); err != nil {
		return fmt.Errorf("--long-tool/--long-args: %w", err)
	}
	return nil
}

// checkPeer checks --peer-url and --peer-bin.
func (c *config) checkPeer() error {
	switch {
	case c.peerURL == "" && c.peerBin == "":
		return nil
	case c.peerURL != "" && c.peerBin != "":
		return errors.New("--peer-url is a server already running, --peer-bin one the bench starts: give one of them")
	case c.phase != "all":
		return errors.New("--peer-url and --peer-bin go with --phase all")
	case c.peerBin != "":
		if st, err := os.Stat(c.peerBin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("--peer-bin %s: not an executable file", c.peerBin)
		}
		return nil
	}
	_, err := newMCP(c.peerURL, 1)
	return err
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
	peer                     bool // a reference server: its CPU in the api column, no worker or broker
	ceil, ceilOps            *result
	task, sync, task1, sync1 *result
	taskAlt                  *result   // (b′): the task path with the other poll mode
	long                     *result   // (g): the handle of a long tool
	syncRand                 *result   // sync, one at a time, randomly timed
	syncQuiet                *result   // sync, one at a time, each after a quiet spell (asynq)
	rss                      *rssRun   // --phase rss
	large                    *largeRun // --phase large
	idle                     *result   // no calls: the cost of waiting for work
	idleCmds                 float64   // asynq: Redis commands/s while idle
	durability               string
	err                      error

	history *historyRun // --phase history
}

func run(ctx context.Context, c *config, cl *cleanup) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	src := root
	if c.src != "" {
		if src, err = filepath.Abs(c.src); err != nil {
			return err
		}
	}
	printHeader(c, root, src)
	logf("building api, %s worker and nats-server…", c.workerKind)
	t0 := time.Now()
	b, err := build(ctx, src, c.pprofDir != "", c.workerKind == "conformance", cl)
	if err != nil {
		return err
	}
	logf("built in %s", time.Since(t0).Round(100*time.Millisecond))
	if c.pprofDir != "" {
		if err := os.MkdirAll(c.pprofDir, 0o755); err != nil {
			return err
		}
	}

	if err := c.historyRedis(ctx, cl); err != nil {
		return err
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
		case "history":
			if r.history != nil {
				printHistory(os.Stdout, c, r.name, r.history)
			}
		default:
			printBackend(os.Stdout, c, r)
		}
		runs = append(runs, r)
	}
	if c.peerURL != "" || c.peerBin != "" {
		r := runPeer(ctx, c, cl)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		printBackend(os.Stdout, c, r)
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

func printHeader(c *config, root, src string) {
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
	fmt.Printf("code:     %s\n", gitState(src))
	if src != root {
		fmt.Printf("          (api and worker from there; the bench and its ceiling from %s)\n", gitState(root))
	}
	fmt.Printf("versions: nats-server %s, nats.go %s, asynq %s, go-redis %s\n",
		modVersion("github.com/nats-io/nats-server/v2"), modVersion("github.com/nats-io/nats.go"),
		modVersion("github.com/hibiken/asynq"), modVersion("github.com/redis/go-redis/v9"))
	fmt.Printf("settings: %s measured per phase after a %s warm-up; concurrency %d; worker --concurrency %d; tasks/get polls %s;\n",
		c.duration, c.warmup, c.conc, c.workerConc, c.poll.describe())
	fmt.Printf("          other poll mode (b′): tasks/get polls %s; one at a time (d): tasks/get polls %s\n", c.pollAltPolicy().describe(), c.pollOnePolicy().describe())
	fmt.Printf("          api/worker --log-level %s; api --inline-wait %s; asynq --asynq-poll %s --asynq-busy-poll %s\n", c.logLevel, c.inlineWait, c.asynqPoll, c.asynqBusy)
	fmt.Printf("          tool %s (%s worker); (g) long tool %s, %d clients, polls %s\n", c.call, c.workerKind, c.long, c.longConc, longPolicy.describe())
	switch {
	case c.peerBin != "":
		fmt.Printf("          peer: %s, started by the bench on a free loopback port: (b), (b′), (d) with the same client\n", c.peerBin)
	case c.peerURL != "":
		fmt.Printf("          peer: %s, already running: (b), (b′), (d) with the same client\n", c.peerURL)
	}
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
		opts := cli.Options{Broker: name, Prefix: prefix}
		opts.Redis.URL, opts.Redis.PollInterval, opts.Redis.BusyPollInterval = c.redisURL, c.asynqPoll, c.asynqBusy
		natsProfile := ""
		switch name {
		case "nats":
			pp := 0
			if c.pprofDir != "" {
				pp, _ = procs.FreePort()
				natsProfile = fmt.Sprintf("http://127.0.0.1:%d", pp)
			}
			url, p, stop, err := startNATS(ctx, b, pp, cl)
			if err != nil {
				return err
			}
			defer stop()
			opts.NATS.URL = url
			beArgs = []string{"--broker", "nats", "--nats", url}
			pids["broker"] = p.Pid()
			r.desc = "NATS JetStream work queue + KV (nats-server " + modVersion("github.com/nats-io/nats-server/v2") + ", file storage, separate process)"
			r.durability = "JetStream file storage (default sync: fsync every 2 min, not per write)"
		case "asynq":
			pid, dur, ver, err := redisInfo(ctx, c.redisURL)
			if err != nil {
				return fmt.Errorf("redis at %s: %w", c.redisURL, err)
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

		if c.phase == "history" {
			var err error
			r.history, err = runHistory(ctx, c, b, opts, beArgs, prefix, pids, cl)
			return err
		}
		if err := ceilings(ctx, c, r, opts, prefix, pids, prof); err != nil {
			return err
		}
		return r.measureProcs(ctx, c, b, beArgs, prefix, pids, natsProfile, prof, cl)
	}()
	return r
}

// ceilings runs (a) and (a′) in-process, before any api or worker runs.
func ceilings(ctx context.Context, c *config, r *backendRun, opts cli.Options, prefix string, pids map[string]int, prof func(string) string) error {
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
// (b)–(g), or the rss or large phase, against them.
func (r *backendRun) measureProcs(ctx context.Context, c *config, b *bins, beArgs []string, prefix string, pids map[string]int, natsProfile string, prof func(string) string, cl *cleanup) error {
	port, err := procs.FreePort()
	if err != nil {
		return err
	}
	var env []string
	targets := map[string]string{}
	if natsProfile != "" {
		targets["nats-server"] = natsProfile
	}
	if c.pprofDir != "" {
		ap, _ := procs.FreePort()
		env = []string{fmt.Sprintf("MCPQ_BENCH_PPROF=127.0.0.1:%d", ap)}
		targets["api"] = fmt.Sprintf("http://127.0.0.1:%d", ap)
	}
	common := append(append([]string{}, beArgs...), "--prefix", prefix, "--log-json", "--log-level", c.logLevel, "--shutdown-grace", "2s")
	apiArgs := append(common, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	if strings.Contains(b.apiHelp, "-inline-wait") {
		apiArgs = append(apiArgs, "--inline-wait", c.inlineWait.String())
	} else {
		logf("%s: this api has no --inline-wait (built from --src before adaptive completion): every task-capable call gets a handle", r.name)
	}
	api, err := start("api", b.api, env, apiArgs...)
	if err != nil {
		return err
	}
	stopAPI := cl.add("stop api", func() { api.Stop(10 * time.Second) })
	defer stopAPI()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitHealthy(ctx, api, base+"/healthz"); err != nil {
		return err
	}
	env = nil
	if c.pprofDir != "" {
		wp, _ := procs.FreePort()
		env = []string{fmt.Sprintf("MCPQ_BENCH_PPROF=127.0.0.1:%d", wp)}
		targets["worker"] = fmt.Sprintf("http://127.0.0.1:%d", wp)
	}
	worker, err := start("worker", b.worker, env, append(common, "--concurrency", fmt.Sprint(c.workerConc))...)
	if err != nil {
		return err
	}
	stopWorker := cl.add("stop worker", func() { worker.Stop(10 * time.Second) })
	defer stopWorker()
	cli, err := newMCP(base+"/mcp", max(c.conc, c.longConc))
	if err != nil {
		return err
	}
	if _, err := waitTools(ctx, cli, worker, c.call.name, c.long.name); err != nil {
		return err
	}
	pids["api"], pids["worker"] = api.Pid(), worker.Pid()
	switch c.phase {
	case "rss":
		r.rss, err = runRSS(ctx, c, cli, api, worker)
		return err
	case "large":
		r.large, err = runLarge(ctx, c, cli, api)
		return err
	}

	x := &runner{ctx: ctx, c: c, name: r.name, pids: pids, procs: []*proc{api, worker}}
	if c.pprofDir != "" {
		x.profile = func(phase string, w window) (func(), error) {
			wait := profileProcs(ctx, targets, w, prof)(phase)
			if phase != "task" {
				return wait, nil
			}
			stop, err := profileWindow(prof("task-bench"), w) // the clients
			if err != nil {
				wait()
				return nil, err
			}
			return func() { stop(); wait() }, nil
		}
	}
	if err := x.taskRows(r, cli); err != nil {
		return err
	}
	if r.sync, err = x.profiledRow("sync", fmt.Sprintf("(c) sync path, %d clients", c.conc), "(c)  sync path: tools/call, result inline", cli.syncOp(c.call)); err != nil {
		return err
	}
	if r.sync1, err = x.row("(d) sync path, one at a time", "(d)  sync path, one at a time", 1, x.window(), cli.syncOp(c.call)); err != nil {
		return err
	}
	// Back-to-back calls arrive just after the worker finished the
	// previous one, in step with a polling consumer; randomly timed
	// calls show the pickup a lone caller sees.
	pause := max(200*time.Millisecond, 2*c.asynqPoll)
	randomly := func(ctx context.Context) (sample, error) {
		if err := procs.Sleep(ctx, time.Duration(mrand.Int64N(int64(pause)))); err != nil {
			return sample{}, err
		}
		return cli.syncOnce(ctx, c.call)
	}
	if r.syncRand, err = x.row(fmt.Sprintf("(e) sync path, one at a time, random 0–%s pause between calls", pause),
		fmt.Sprintf("(e)  sync, one at a time, 0–%s pauses", pause), 1, x.window(), randomly); err != nil {
		return err
	}
	r.syncRand.noRate = true

	// Those calls come within a second of the previous one, when an Asynq
	// worker is still busy and polls every --asynq-busy-poll; a call after
	// a quiet second meets the idle poll.
	if r.name == "asynq" && c.asynqBusy < c.asynqPoll {
		quiet := time.Second + 50*time.Millisecond // asynqbroker's BusyFor and a margin
		afterQuiet := func(ctx context.Context) (sample, error) {
			if err := procs.Sleep(ctx, quiet+time.Duration(mrand.Int64N(int64(2*c.asynqPoll)))); err != nil {
				return sample{}, err
			}
			return cli.syncOnce(ctx, c.call)
		}
		w := x.window()
		w.to = w.from.Add(max(c.duration, 15*time.Second))
		if r.syncQuiet, err = x.row(fmt.Sprintf("(e′) sync path, one at a time, %s + random 0–%s pause between calls", quiet, 2*c.asynqPoll),
			"(e′) sync, one at a time, after a quiet second", 1, w, afterQuiet); err != nil {
			return err
		}
		r.syncQuiet.noRate = true
	}

	if err := r.idlePhase(x); err != nil {
		return err
	}
	return x.longRow(r, cli)
}

// idlePhase is (f): no calls for one phase, the cost of waiting for work
// (not free when the consumer polls).
func (r *backendRun) idlePhase(x *runner) error {
	logf("%s: (f) idle: no calls", r.name)
	w := x.window()
	cpu := watchCPU(x.pids, w)
	if err := procs.Sleep(x.ctx, time.Until(w.from)); err != nil {
		return err
	}
	cmds0, _ := redisCommands(x.ctx, x.c.redisURL, r.name)
	if err := procs.Sleep(x.ctx, time.Until(w.to)); err != nil {
		return err
	}
	cmds1, _ := redisCommands(x.ctx, x.c.redisURL, r.name)
	r.idle = &result{name: "(f)  idle: no calls", window: w.to.Sub(w.from), noRate: true, cpu: cpu.wait()}
	if cmds1 > cmds0 {
		r.idleCmds = float64(cmds1-cmds0) / w.to.Sub(w.from).Seconds()
	}
	return x.alive()
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
			if _, err := fmt.Sscan(v, &pid); err != nil {
				return 0, "", "", fmt.Errorf("redis INFO process_id %q: %w", v, err)
			}
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
	return waitFor(ctx, p, 20*time.Second, 20*time.Millisecond, func() bool {
		resp, err := procs.Get(ctx, url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	}, func() error { return fmt.Errorf("api not healthy within 20s:\n%s", p.out.String()) })
}

// waitTools waits until the server at cli lists every one of tools (for
// the api: until the worker's tools are in the catalog it reads) and
// returns the server's name and version from the answer's serverInfo ("" if
// none). p, when not nil, is the process serving them: its exit ends the wait.
func waitTools(ctx context.Context, cli *mcp, p *proc, tools ...string) (string, error) {
	var server string
	var missing []string
	var lastErr error
	err := waitFor(ctx, p, 20*time.Second, 50*time.Millisecond, func() bool {
		var list struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			Meta struct {
				Server struct {
					Name    string `json:"name"`
					Version string `json:"version"`
				} `json:"io.modelcontextprotocol/serverInfo"`
			} `json:"_meta"`
		}
		_, lastErr = cli.call(ctx, "tools/list", "", "", false, &list)
		listed := map[string]bool{}
		for _, t := range list.Tools {
			listed[t.Name] = true
		}
		missing = nil
		for _, t := range tools {
			if !listed[t] {
				missing = append(missing, t)
			}
		}
		server = strings.TrimSpace(list.Meta.Server.Name + " " + list.Meta.Server.Version)
		return lastErr == nil && len(missing) == 0
	}, func() error {
		out := ""
		if p != nil {
			out = "\n" + p.out.String()
		}
		if lastErr != nil {
			return fmt.Errorf("tools %q not listed within 20s (last error %w):%s", missing, lastErr, out)
		}
		return fmt.Errorf("tools %q not listed within 20s:%s", missing, out)
	})
	if err != nil {
		return "", err
	}
	return server, nil
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
				if procs.Sleep(ctx, time.Until(win.from)) != nil {
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
	resp, err := procs.Get(ctx, url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
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
