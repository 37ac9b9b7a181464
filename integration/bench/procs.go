package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/internal/procs"
)

// cleanup is a stack of undo steps run once each, last registered first:
// at the end of a backend's run, at exit, and on Ctrl-C.
type cleanup struct {
	mu    sync.Mutex
	steps []*step
}

type step struct {
	name string
	once sync.Once
	fn   func()
}

func (s *step) run() { s.once.Do(s.fn) }

// add registers fn and returns a function that runs it now (once).
func (c *cleanup) add(name string, fn func()) func() {
	s := &step{name: name, fn: fn}
	c.mu.Lock()
	c.steps = append(c.steps, s)
	c.mu.Unlock()
	return s.run
}

// runAll runs every step not yet run, newest first.
func (c *cleanup) runAll() {
	c.mu.Lock()
	steps := append([]*step(nil), c.steps...)
	c.mu.Unlock()
	for i := len(steps) - 1; i >= 0; i-- {
		steps[i].run()
	}
}

// bins are the binaries the process phases start; worker is cmd/worker or,
// with --worker conformance, examples/conformance.
type bins struct {
	dir, api, worker, nats string
	apiHelp                string // api --help: which flags it takes (an older --src may lack some)
}

// pprofOverlay is compiled into api and worker (only with --pprof, through
// `go build -overlay`, without touching the repository): it serves
// net/http/pprof on $MCPQ_BENCH_PPROF when that is set.
const pprofOverlay = `package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if a := os.Getenv("MCPQ_BENCH_PPROF"); a != "" {
		go func() { _ = http.ListenAndServe(a, nil) }()
	}
}
`

// build compiles api, worker (or the conformance worker) and nats-server
// (the version in go.mod) into a temporary directory, like
// integration/harness does.
func build(ctx context.Context, root string, withPprof, conformance bool, cl *cleanup) (*bins, error) {
	dir, err := os.MkdirTemp("", "mcpq-bench-")
	if err != nil {
		return nil, err
	}
	cl.add("remove "+dir, func() { _ = os.RemoveAll(dir) })
	workerPkg, workerBin := "./cmd/worker", "worker"
	if conformance {
		workerPkg, workerBin = "./examples/conformance", "conformance"
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if withPprof {
		src := filepath.Join(dir, "zz_bench_pprof.go")
		if err := os.WriteFile(src, []byte(pprofOverlay), 0o644); err != nil {
			return nil, err
		}
		overlay := fmt.Sprintf(`{"Replace":{%q:%q,%q:%q}}`,
			filepath.Join(root, "cmd", "api", "zz_bench_pprof.go"), src,
			filepath.Join(root, filepath.FromSlash(workerPkg), "zz_bench_pprof.go"), src)
		ov := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ov, []byte(overlay), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "-overlay", ov)
	}
	args = append(args, "./cmd/api", workerPkg, "github.com/nats-io/nats-server/v2")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	b := &bins{dir: dir, api: filepath.Join(dir, "api"), worker: filepath.Join(dir, workerBin), nats: filepath.Join(dir, "nats-server")}
	for _, p := range []string{b.api, b.worker, b.nats} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("build produced no %s: %w", p, err)
		}
	}
	help, _ := exec.CommandContext(ctx, b.api, "--help").CombinedOutput() // exits 0 or 2; the flags are what matters
	b.apiHelp = string(help)
	return b, nil
}

// repoRoot finds the module root above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/mcpqueue/mcpqueue") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run the bench inside the mcpqueue module (go run ./integration/bench)")
		}
		dir = parent
	}
}

// proc is a child process whose output keeps its last 64 KiB.
type proc struct {
	*procs.Proc
	name string
	out  *tailBuffer
}

type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	cut bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 64<<10 {
		t.b = append(t.b[:0], t.b[len(t.b)-48<<10:]...)
		t.cut = true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut {
		return "…" + string(t.b)
	}
	return string(t.b)
}

// start runs bin in its own process group (Ctrl-C reaches the bench only,
// which then stops children in order); the kernel kills it if the bench dies.
func start(name, bin string, env []string, args ...string) (*proc, error) {
	p := &proc{name: name, out: &tailBuffer{}}
	var err error
	if p.Proc, err = procs.Start(bin, env, p.out, true, args...); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// gone is nil while p runs (or p is nil); once it has exited, an error with
// how it ended and its output.
func (p *proc) gone() error {
	if p == nil || !p.Exited() {
		return nil
	}
	return fmt.Errorf("%s exited: %w\n%s", p.name, p.Err(), p.out.String())
}

// waitFor polls ready every interval until it holds; it fails at once if p
// (nil: none) exits or ctx ends, and with late() once within has passed.
func waitFor(ctx context.Context, p *proc, within, every time.Duration, ready func() bool, late func() error) error {
	deadline := time.Now().Add(within)
	for !ready() {
		if err := p.gone(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return late()
		}
		if err := procs.Sleep(ctx, every); err != nil {
			return err
		}
	}
	return nil
}

func (p *proc) waitOutput(ctx context.Context, s string, within time.Duration) error {
	return waitFor(ctx, p, within, 20*time.Millisecond,
		func() bool { return strings.Contains(p.out.String(), s) },
		func() error {
			return fmt.Errorf("%s did not print %q within %s:\n%s", p.name, s, within, p.out.String())
		})
}

// startNATS runs nats-server with JetStream and file storage in a temporary
// directory, as integration/harness does.
func startNATS(ctx context.Context, b *bins, profilePort int, cl *cleanup) (url string, p *proc, stop func(), err error) {
	port, err := procs.FreePort()
	if err != nil {
		return "", nil, nil, err
	}
	dir, err := os.MkdirTemp("", "mcpq-bench-nats-")
	if err != nil {
		return "", nil, nil, err
	}
	args := []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", dir}
	if profilePort > 0 {
		args = append(args, "--profile", fmt.Sprint(profilePort))
	}
	p, err = start("nats-server", b.nats, nil, args...)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, nil, err
	}
	stop = cl.add("stop nats-server", func() { p.Stop(5 * time.Second); _ = os.RemoveAll(dir) })
	if err := p.waitOutput(ctx, "Server is ready", 20*time.Second); err != nil {
		stop()
		return "", nil, nil, err
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", port), p, stop, nil
}

// dropRedisKeys deletes what a system with this prefix left in Redis: its
// own keys ("<prefix>:…"), its Asynq queues' — one per pool,
// "asynq:{<prefix>.pool.<pool>}:…" (asynqbroker.PoolQueueName), one per
// tool, "asynq:{<prefix>.tool.<tool>}:…" (asynqbroker.QueueName), and any
// "asynq:{<prefix>}:…" — and the queues' entries in asynq:queues. It
// returns how many keys it deleted.
func dropRedisKeys(url, prefix string) (int, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return 0, err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	for _, pattern := range []string{prefix + ":*", "asynq:{" + prefix + "}:*", "asynq:{" + prefix + ".tool.*}:*", "asynq:{" + prefix + ".pool.*}:*"} {
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		var keys []string
		flush := func() error {
			if len(keys) == 0 {
				return nil
			}
			err := rdb.Unlink(ctx, keys...).Err()
			n += len(keys)
			keys = keys[:0]
			return err
		}
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) >= 1000 {
				if err := flush(); err != nil {
					return n, err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return n, err
		}
		if err := flush(); err != nil {
			return n, err
		}
	}
	queues, err := rdb.SMembers(ctx, "asynq:queues").Result()
	if err != nil {
		return n, err
	}
	ours := []any{prefix}
	for _, q := range queues {
		if strings.HasPrefix(q, prefix+".tool.") || strings.HasPrefix(q, prefix+".pool.") {
			ours = append(ours, q)
		}
	}
	return n, rdb.SRem(ctx, "asynq:queues", ours...).Err()
}
