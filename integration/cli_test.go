package integration

// The binaries on the command line: their configuration from flags and the
// environment, and the api's operator subcommands (tasks, tools).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// runBinary runs bin with env added to an environment that holds none of
// the binaries' own variables, and returns its combined output and exit
// status. It must end by itself within 30 s.
func runBinary(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}, env...)
	out, err := cmd.CombinedOutput()
	code, ok := exitStatus(ctx, err)
	if !ok {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
	return string(out), code
}

// exitStatus is the exit status of a command whose run, bounded by ctx,
// ended with err; false if it did not run or ctx ended it.
func exitStatus(ctx context.Context, err error) (int, bool) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &ee) && ctx.Err() == nil:
		return ee.ExitCode(), true
	}
	return 0, false
}

// A bad value in an environment variable refuses to start, naming the
// variable and the value, in api and worker alike; a boolean variable says
// true to mean on.
func TestConfigStrictEnvironment(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	for name, bin := range map[string]string{"api": b.API, "worker": b.Worker} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// A NATS URL nothing listens on: every case must end before
			// connecting.
			args := []string{"--nats", "nats://127.0.0.1:1"}
			for _, c := range []struct{ env, want string }{
				{"MCPQ_CONCURRENCY=abc", `MCPQ_CONCURRENCY="abc": want an integer`},
				{"MCPQ_LEASE=5", `MCPQ_LEASE="5": want a duration with a unit`},
				{"MCPQ_REQUIRE_DURABLE=yes-please", `MCPQ_REQUIRE_DURABLE="yes-please": want true, false, 1 or 0`},
				{"MCPQ_BROKER=kafka", `MCPQ_BROKER="kafka": want one of nats, asynq`},
				{"MCPQ_TENANT_SHARE=-0.5", `--tenant-share -0.5: a share is a fraction of the slots above 0`},
			} {
				out, code := runBinary(t, bin, []string{c.env}, args...)
				if code == 0 || !strings.Contains(out, c.want) {
					t.Errorf("%s %s: exit status %d, output:\n%s\nwant a non-zero status and %q", c.env, name, code, out, c.want)
				}
			}
			if name == "api" {
				out, code := runBinary(t, bin, []string{"MCPQ_FAULT=oops"}, args...)
				if code == 0 || !strings.Contains(out, `MCPQ_FAULT="oops": want kill-after-record`) {
					t.Errorf("MCPQ_FAULT=oops: exit status %d, output:\n%s", code, out)
				}
			}
			// true turns it on: memory storage is then refused.
			out, code := runBinary(t, bin, []string{"MCPQ_REQUIRE_DURABLE=true", "MCPQ_NATS_STORAGE=memory"}, args...)
			if code == 0 || !strings.Contains(out, "--require-durable: --nats-storage is memory") {
				t.Errorf("MCPQ_REQUIRE_DURABLE=true: exit status %d, output:\n%s\nwant the memory storage refused", code, out)
			}
			// The command line wins over a bad variable.
			out, code = runBinary(t, bin, []string{"MCPQ_CONCURRENCY=abc", "MCPQ_REDIS_PASSWORD=hunter2", "MCPQ_STATE_KEY=k3y"},
				append(args, "--concurrency", "4", "--print-config")...)
			if code != 0 {
				t.Fatalf("--print-config: exit status %d:\n%s", code, out)
			}
			for _, row := range []string{"--concurrency  MCPQ_CONCURRENCY  4", "--require-durable  MCPQ_REQUIRE_DURABLE  false  default", "--nats  NATS_URL  nats://127.0.0.1:1  flag"} {
				if !strings.Contains(strings.Join(strings.Fields(out), "  "), row) {
					t.Errorf("--print-config has no row %q:\n%s", row, out)
				}
			}
			if strings.Contains(out, "hunter2") || strings.Contains(out, "k3y") {
				t.Errorf("--print-config shows a secret:\n%s", out)
			}
		})
	}
}

// cliRun is one run of the api binary's tasks subcommand.
type cliRun struct {
	stdout, stderr string
	code           int
}

// tasksCLI runs `api tasks args…` against s's backend and prefix.
func (s *system) tasksCLI(t *testing.T, args ...string) cliRun {
	t.Helper()
	return s.apiCLI(t, "tasks", args...)
}

// toolsCLI runs `api tools args…` against s's backend and prefix.
func (s *system) toolsCLI(t *testing.T, args ...string) cliRun {
	t.Helper()
	return s.apiCLI(t, "tools", args...)
}

// apiCLI runs `api sub args…` against s's backend and prefix.
func (s *system) apiCLI(t *testing.T, sub string, args ...string) cliRun {
	t.Helper()
	argv := append([]string{sub}, args...)
	argv = append(append(argv, s.be.Args...), "--prefix", s.prefix)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bins.API, argv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code, ok := exitStatus(ctx, err)
	if !ok {
		t.Fatalf("api %s: %v", strings.Join(argv, " "), err)
	}
	r := cliRun{stdout: out.String(), stderr: errOut.String(), code: code}
	t.Logf("api %s %s → %d\n%s%s", sub, strings.Join(args, " "), r.code, r.stdout, r.stderr)
	if strings.Contains(r.stderr, "WARNING: DATA RACE") {
		t.Errorf("api %s %s reported a data race", sub, strings.Join(args, " "))
	}
	return r
}

// want fails the test unless the run exited with code and its output
// contains every one of subs.
func (r cliRun) want(t *testing.T, code int, subs ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range subs {
		if !strings.Contains(r.stdout+r.stderr, s) {
			t.Fatalf("output does not contain %q\nstdout: %s\nstderr: %s", s, r.stdout, r.stderr)
		}
	}
}

// jsonLines decodes `tasks list --json` output.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("list --json: %v in %q", err, out)
		}
		recs = append(recs, m)
	}
	return recs
}

// The operator CLI (api tasks list|get|cancel|purge) on both backends,
// against real api and worker processes: a cancel from the CLI reaches the
// running handler, purge removes what it names, and bad input is a usage
// error that touches nothing.
func TestTasksCLI(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		w := s.worker(t, "worker")
		c := harness.NewClient(s.mcpURL, true)

		done := c.StartTask(t, "noop", map[string]any{})
		c.WaitStatus(t, done, 20*time.Second, "completed")
		failed := c.StartTask(t, "fail", map[string]any{"message": "boom"})
		c.WaitStatus(t, failed, 20*time.Second, "completed")
		running := c.StartTask(t, "wait", map[string]any{"ms": 120000})
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			tk, err := c.GetTask(t.Context(), running)
			return err == nil && strings.HasPrefix(tk.StatusMessage, "waiting"), "handler not running yet"
		})

		// list: newest first, filters, limit, JSON lines.
		r := s.tasksCLI(t, "list")
		r.want(t, 0, "ID", "STATUS", running, failed, done, "waiting 120000 ms")
		if i, j, k := strings.Index(r.stdout, running), strings.Index(r.stdout, failed), strings.Index(r.stdout, done); !(i < j && j < k) {
			t.Fatalf("list is not newest first:\n%s", r.stdout)
		}
		r = s.tasksCLI(t, "list", "--active", "--json")
		r.want(t, 0)
		if recs := jsonLines(t, r.stdout); len(recs) != 1 || recs[0]["id"] != running || recs[0]["status"] != "working" {
			t.Fatalf("list --active: %v, want only %s working", recs, running)
		}
		r = s.tasksCLI(t, "list", "--json", "--status", "completed", "--tool", "noop")
		if recs := jsonLines(t, r.stdout); len(recs) != 1 || recs[0]["id"] != done {
			t.Fatalf("list --status completed --tool noop: %v, want only %s", recs, done)
		}
		r = s.tasksCLI(t, "list", "--json", "--limit", "2")
		if recs := jsonLines(t, r.stdout); len(recs) != 2 || recs[0]["id"] != running || recs[1]["id"] != failed {
			t.Fatalf("list --limit 2: %v, want %s and %s", recs, running, failed)
		}
		r = s.tasksCLI(t, "list", "--owner", "nobody")
		if r.want(t, 0); strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
			t.Fatalf("list --owner nobody lists tasks:\n%s", r.stdout)
		}

		// get: the record; an unknown id is exit 1.
		r = s.tasksCLI(t, "get", failed)
		r.want(t, 0, `"tool": "fail"`, "boom")
		var rec map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || rec["id"] != failed {
			t.Fatalf("get %s: %v %v", failed, rec, err)
		}
		unknown := "UNKNOWNTASKID0000000000000"
		s.tasksCLI(t, "get", unknown).want(t, 1, "no task "+unknown)

		// cancel: the running handler hears it; each id is reported.
		start := time.Now()
		r = s.tasksCLI(t, "cancel", running, done, unknown)
		r.want(t, 1, running+": cancelled\n", done+": already terminal (completed)\n", unknown+": not found\n")
		w.WaitLine(t, 5*time.Second, running, "handler observed cancellation")
		t.Logf("the CLI's cancel reached the handler within %s", time.Since(start))
		if tk := c.WaitStatus(t, running, 5*time.Second, "cancelled"); !strings.Contains(tk.StatusMessage, "operator") {
			t.Fatalf("cancelled task says %q", tk.StatusMessage)
		}

		// Bad input: usage errors (exit 2) that change nothing.
		s.tasksCLI(t, "frobnicate").want(t, 2, `unknown command "frobnicate"`)
		s.tasksCLI(t, "list", "--status", "runing").want(t, 2, `unknown status "runing"`) //nolint:misspell // the misspelt status is the test
		s.tasksCLI(t, "purge", "--older-than", "soon").want(t, 2, "-older-than")
		s.tasksCLI(t, "purge", "--status", "working").want(t, 2, "purge deletes only ended tasks")
		s.tasksCLI(t, "purge").want(t, 2, "--all")
		s.tasksCLI(t, "get").want(t, 2, "exactly one task id")

		// purge: a dry run counts, a real one deletes exactly what matches.
		s.tasksCLI(t, "purge", "--tool", "noop", "--dry-run").want(t, 0, "would purge 1 terminal tasks (completed 1)")
		s.tasksCLI(t, "get", done).want(t, 0, done)
		s.tasksCLI(t, "purge", "--tool", "noop").want(t, 0, "purged 1 terminal tasks (completed 1)")
		s.tasksCLI(t, "get", done).want(t, 1, "no task "+done)
		s.tasksCLI(t, "purge", "--older-than", "1h").want(t, 0, "purged 0 terminal tasks")
		s.tasksCLI(t, "purge", "--all").want(t, 0, "purged 2 terminal tasks (completed 1, cancelled 1)")
		r = s.tasksCLI(t, "list", "--json")
		if recs := jsonLines(t, r.stdout); len(recs) != 0 {
			t.Fatalf("after purge --all: %v", recs)
		}
	})
}

// toolLive reads `api tools list`: whether tool is listed and live.
func toolLive(r cliRun, tool string) (listed, live bool) {
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == tool {
			return true, f[1] == "yes"
		}
	}
	return false, false
}

// TestToolsCLI: api tools lists the catalog with whether a worker serves
// each tool; rm removes an entry, so calls of it get the unknown-tool error
// until a worker publishes it again; bad usage is exit status 2.
func TestToolsCLI(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		w := s.worker(t, "worker")
		run := s.toolsCLI(t, "list")
		run.want(t, 0, "NAME", "wait")
		if listed, live := toolLive(run, "wait"); !listed || !live {
			t.Fatalf("wait listed %v, live %v; want a live entry", listed, live)
		}
		if err := w.Stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		s.toolsCLI(t, "rm", "wait", "nope").want(t, 1, "wait\tremoved", "nope\tnot found")
		if listed, _ := toolLive(s.toolsCLI(t, "list"), "wait"); listed {
			t.Fatal("wait still listed after api tools rm")
		}
		c := harness.NewClient(s.mcpURL, true)
		_, err := c.CallTool(context.Background(), "wait", map[string]any{"ms": 1})
		var rpc *harness.RPCError
		if !errors.As(err, &rpc) || !strings.Contains(rpc.Message, "Unknown tool: wait") {
			t.Fatalf("tools/call of a removed tool: %v, want Unknown tool", err)
		}
		s.toolsCLI(t, "rm").want(t, 2, "rm needs the names")
		s.toolsCLI(t, "frobnicate").want(t, 2, `unknown command "frobnicate"`)
		s.worker(t, "worker-again")
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			_, live := toolLive(s.toolsCLI(t, "list"), "wait")
			return live, "wait not live again after a worker started"
		})
	})
}
