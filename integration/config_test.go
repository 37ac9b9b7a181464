package integration

import (
	"context"
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
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee) && ctx.Err() == nil:
		return string(out), ee.ExitCode()
	}
	t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	return "", 0
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
