package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// handBack is what a worker logs when it is handed a job of a tool it has
// no handler for: with jobs routed by tool, never in normal operation.
const handBack = "no handler for the tool"

// startAll starts n tasks of tool at once and returns their ids and when the
// last handle came back.
func startAll(t *testing.T, c *harness.Client, n int, tool string, args map[string]any) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ids[i] = c.StartTask(t, tool, args) })
	}
	wg.Wait()
	return ids
}

// runs counts, per task, the "task running" lines of the given processes.
func runs(procs ...*harness.Proc) map[string]int {
	out := map[string]int{}
	for _, p := range procs {
		for _, line := range strings.Split(p.Output(), "\n") {
			if !strings.Contains(line, `"message":"task running"`) {
				continue
			}
			if _, rest, ok := strings.Cut(line, `"task":"`); ok {
				id, _, _ := strings.Cut(rest, `"`)
				out[id]++
			}
		}
	}
	return out
}

// TestFleetMixedPools: pools that serve different tools share one system.
// On NATS the api is the all-in-one (embedded NATS, the demo tools
// in-process), on Asynq a plain api; beside it two demo workers and one
// fixtures worker with 8 slots. 40 one-second slow_compute tasks (only the
// fixtures worker serves it) created at once all complete within 8 s of
// creation, each run once, and no process is ever handed a job it cannot run.
func TestFleetMixedPools(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		b := harness.Build(t)
		prefix := harness.Prefix("it", t.Name())
		var (
			mcpURL string
			api    *harness.Proc
			be     harness.Backend
		)
		if broker == "nats" {
			mcpURL, be, api = harness.AllInOne(t, b)
			prefix = "mcpq" // the all-in-one api's own
		} else {
			be = harness.NewBackend(t, b, broker, prefix)
			mcpURL, api = harness.API(t, b, be, prefix)
		}
		procs := []*harness.Proc{api}
		for _, name := range []string{"demo-1", "demo-2"} {
			procs = append(procs, harness.Worker(t, b.Worker, name, be, prefix))
		}
		fixtures := harness.Worker(t, b.Conformance, "fixtures", be, prefix, "--concurrency", "8")
		procs = append(procs, fixtures)

		c := harness.NewClient(mcpURL, true)
		created := time.Now()
		ids := startAll(t, c, 40, "slow_compute", map[string]any{"seconds": 1})
		for _, id := range ids {
			c.WaitStatus(t, id, time.Until(created.Add(8*time.Second)), "completed")
		}
		t.Logf("40 one-second tasks on 8 slots completed %s after creation", time.Since(created).Round(10*time.Millisecond))
		got := runs(procs...)
		for _, id := range ids {
			if got[id] != 1 {
				t.Errorf("task %s ran %d times, want once", id, got[id])
			}
		}
		for _, p := range procs {
			if n := strings.Count(p.Output(), handBack); n > 0 {
				t.Errorf("%s handed %d jobs back (%q): jobs must reach only workers that serve their tool", p.Name, n, handBack)
			}
		}
	})
}

// TestFleetScaleToZero: the only pool serving slow_compute is gone for
// longer than the old catalog expiry (30 s). The tool stays listed; calls
// still get task handles, saying no worker serves the tool right now; the
// api stays ready; a worker started afterwards runs them all. A tool never
// registered still gets the unknown-tool error.
func TestFleetScaleToZero(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		w := s.conformanceWorker(t, "fixtures")
		c := harness.NewClient(s.mcpURL, true)
		if id := c.StartTask(t, "slow_compute", map[string]any{"seconds": 0}); c.WaitStatus(t, id, 20*time.Second, "completed") == nil {
			t.Fatal("warm-up task")
		}
		if err := w.Stop(30 * time.Second); err != nil {
			t.Fatalf("stopping the worker: %v", err)
		}
		stopped := time.Now()
		// The catalog notices that nobody serves the tool any more (two to
		// four heartbeats), and the old expiry passes.
		harness.Eventually(t, 90*time.Second, func() (bool, string) {
			run := s.toolsCLI(t, "list")
			listed, live := toolLive(run, "slow_compute")
			return listed && !live && time.Since(stopped) > 31*time.Second, fmt.Sprintf("%s after the stop; api tools list:\n%s%s", time.Since(stopped).Round(time.Second), run.stdout, run.stderr)
		})
		var list struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		if err := c.Call(context.Background(), "tools/list", map[string]any{}, &list); err != nil {
			t.Fatal(err)
		}
		listed := false
		for _, tl := range list.Tools {
			listed = listed || tl.Name == "slow_compute"
		}
		if !listed {
			t.Fatalf("tools/list with the pool at zero lacks slow_compute: %+v", list)
		}

		ids := startAll(t, c, 10, "slow_compute", map[string]any{"seconds": 0})
		for _, id := range ids {
			tk, err := c.GetTask(context.Background(), id)
			if err != nil || tk.Status != "working" || !strings.Contains(tk.StatusMessage, "no worker is serving") {
				t.Fatalf("task %s with the pool at zero: %+v, %v; want working, saying no worker serves the tool", id, tk, err)
			}
		}
		api := strings.TrimSuffix(s.mcpURL, "/mcp")
		if code, body := harness.Get(api + "/readyz"); code != 200 {
			t.Fatalf("api /readyz with the pool at zero: %d %s", code, body)
		}
		_, err := c.CallTool(context.Background(), "never_registered", map[string]any{})
		var rpc *harness.RPCError
		if !errors.As(err, &rpc) || !strings.Contains(rpc.Message, "Unknown tool: never_registered") {
			t.Fatalf("tools/call of a tool never registered: %v, want Unknown tool", err)
		}

		s.conformanceWorker(t, "fixtures-again")
		for _, id := range ids {
			if tk := c.WaitStatus(t, id, 30*time.Second, "completed"); strings.Contains(tk.StatusMessage, "no worker") {
				t.Fatalf("completed task %s still says %q", id, tk.StatusMessage)
			}
		}
	})
}

// TestFleetExternalWorker: examples/external-worker, a module of its own
// that requires this one, imports nothing internal, builds on its own, and
// serves its tool to an api on either backend.
func TestFleetExternalWorker(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(harness.RepoRoot(), "examples", "external-worker")
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Imports " "}}`, "./...")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", dir, err, out)
	}
	if !strings.HasPrefix(string(out), "example.com/external-worker:") || strings.Contains(string(out), "/internal") {
		t.Fatalf("the example's packages and imports: %s (want its own module, nothing internal)", out)
	}
	onBrokers(t, func(t *testing.T, s *system) {
		harness.Worker(t, s.bins.ExternalWorker, "external-worker", s.be, s.prefix)
		c := harness.NewClient(s.mcpURL, true)
		id := c.StartTask(t, "word_count", map[string]any{"text": "one two  three\nfour"})
		tk := c.WaitStatus(t, id, 20*time.Second, "completed")
		if got := resultText(t, tk.Result); got != `{"words":4}` {
			t.Fatalf("word_count result %q, want {\"words\":4}", got)
		}
		inline := harness.NewClient(s.mcpURL, false)
		res, err := inline.CallTool(context.Background(), "word_count", map[string]any{"text": "a b"})
		if err != nil || !strings.Contains(string(res["structuredContent"]), `"words":2`) {
			t.Fatalf("inline word_count: %s, %v", res["structuredContent"], err)
		}
	})
}

// moduleSteps are the README's steps ("Writing a worker") for using this
// module from another while no version is published: in the new module's
// directory, with the clone at ../mcpqueue. The README shows each line.
var moduleSteps = []string{
	"go mod init example.com/my-worker",
	"go mod edit -require=github.com/mcpqueue/mcpqueue@v0.0.0 -replace=github.com/mcpqueue/mcpqueue=../mcpqueue",
	"go build -mod=mod .",
}

// TestExternalModuleSteps: the example worker's main.go, copied into a
// module of its own outside the repository next to a "clone" (this
// checkout), builds with exactly the README's steps, offline: every module
// comes from the module cache (GOPROXY=off; sums from the cache too).
func TestExternalModuleSteps(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range moduleSteps {
		if !strings.Contains(string(readme), "\n"+step+"\n") {
			t.Errorf("README.md does not show the step %q on a line of its own", step)
		}
	}
	dir := t.TempDir()
	if err := os.Symlink(harness.RepoRoot(), filepath.Join(dir, "mcpqueue")); err != nil {
		t.Fatal(err)
	}
	mod := filepath.Join(dir, "my-worker")
	src, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "examples", "external-worker", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, step := range moduleSteps {
		args := strings.Fields(step)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", step, err, out)
		}
	}
	gomod, err := os.ReadFile(filepath.Join(mod, "go.mod"))
	if err != nil || !strings.Contains(string(gomod), "github.com/mcpqueue/mcpqueue => ../mcpqueue") {
		t.Fatalf("go.mod after the steps (%v):\n%s", err, gomod)
	}
	if fi, err := os.Stat(filepath.Join(mod, "my-worker")); err != nil || fi.Size() == 0 {
		t.Fatalf("go build wrote no my-worker binary: %v", err)
	}
}

// TestFleetToolLeases: two pools whose tools have different leases, 2 s
// (slow_compute, two workers) and 30 s (wait, one worker). Killing the
// worker running a slow_compute task hands it to the pool's other worker
// within 5 s; the wait pool keeps its 30 s lease: its consumer (NATS) is
// unchanged by the other pool starting, and a wait task held longer than
// 2 s runs once.
func TestFleetToolLeases(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		// The reaper requeues a lapsed lease on Asynq (its own recovery
		// takes a minute or more): every 500 ms here.
		s := newSystem(t, broker, "--reap-interval", "500ms")
		waitPool := s.worker(t, "wait-pool", "--tools", "wait", "--lease", "30s")
		var before jetstream.ConsumerConfig
		if broker == "nats" {
			before = consumerConfig(t, s, "wait")
		}
		fast1 := s.conformanceWorker(t, "fast-1", "--tools", "slow_compute", "--lease", "2s")
		fast2 := s.conformanceWorker(t, "fast-2", "--tools", "slow_compute", "--lease", "2s")
		if broker == "nats" {
			after := consumerConfig(t, s, "wait")
			if after.AckWait != 30*time.Second || after.AckWait != before.AckWait || after.MaxDeliver != before.MaxDeliver {
				t.Fatalf("the wait pool's consumer: %s/%d before, %s/%d after the 2s pool started; want 30s, unchanged",
					before.AckWait, before.MaxDeliver, after.AckWait, after.MaxDeliver)
			}
			if fast := consumerConfig(t, s, "slow_compute"); fast.AckWait != 2*time.Second {
				t.Fatalf("slow_compute's consumer has AckWait %s, want 2s", fast.AckWait)
			}
		}

		c := harness.NewClient(s.mcpURL, true)
		long := c.StartTask(t, "wait", map[string]any{"ms": 4000})
		id := c.StartTask(t, "slow_compute", map[string]any{"seconds": 3})
		var victim, other *harness.Proc
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			switch {
			case hasLine(fast1.Output(), id, "task running"):
				victim, other = fast1, fast2
			case hasLine(fast2.Output(), id, "task running"):
				victim, other = fast2, fast1
			}
			return victim != nil, "no worker of the 2s pool has started " + id
		})
		victim.Kill()
		killed := time.Now()
		harness.Eventually(t, 5*time.Second, func() (bool, string) {
			return hasLine(other.Output(), id, "task running"), fmt.Sprintf("the pool's other worker has not taken %s over %s after the kill", id, time.Since(killed).Round(100*time.Millisecond))
		})
		t.Logf("the 2s pool's task was running on its other worker %s after the kill", time.Since(killed).Round(10*time.Millisecond))
		c.WaitStatus(t, id, 20*time.Second, "completed")
		c.WaitStatus(t, long, 20*time.Second, "completed")
		if n := runs(waitPool)[long]; n != 1 {
			t.Fatalf("the 4s wait task ran %d times on its 30s-lease pool, want once", n)
		}
	})
}

func consumerConfig(t *testing.T, s *system, tool string) jetstream.ConsumerConfig {
	t.Helper()
	nc, js, err := harness.JetStream(s.be.Args[1], "fleet-probe")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, natsbroker.NamesFor(s.prefix).Stream, natsbroker.ConsumerName(tool))
	if err != nil {
		t.Fatalf("consumer of %s: %v", tool, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.Config
}
