package integration

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// The all-in-one api's embedded NATS requires authentication: its INFO
// says auth_required and a client without credentials is refused. The key
// it generated is in ./data, mode 0600. A worker and api tasks run from the
// api's directory with only --nats, as the README says, join and work; run
// from elsewhere they are refused with a hint, and --data-dir lets them in.
func TestAllInOneNATSAuth(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	mcpURL, be, _ := harness.AllInOne(t, b)

	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(be.NATSURL, "nats://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	info, err := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	if err != nil || !strings.HasPrefix(info, "INFO ") || !strings.Contains(info, `"auth_required":true`) {
		t.Fatalf("the embedded NATS's INFO: %q %v; want auth_required", info, err)
	}
	key := filepath.Join(be.Home, "data", "nats.nk")
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key %s: %v %v; want mode 0600", key, fi, err)
	}

	cli := func(dir string, args ...string) cliRun {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, b.API, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "MCPQ_DATA_DIR=", "MCPQ_NATS_NKEY=", "MCPQ_PREFIX=")
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code, ok := exitStatus(ctx, err)
		if !ok {
			t.Fatalf("api %s: %v", strings.Join(args, " "), err)
		}
		r := cliRun{stdout: out.String(), stderr: errOut.String(), code: code}
		t.Logf("api %s (in %s) → %d\n%s%s", strings.Join(args, " "), dir, r.code, r.stdout, r.stderr)
		return r
	}
	// Elsewhere, without the key: refused, saying where the key is.
	cli(t.TempDir(), "tasks", "list", "--nats", be.NATSURL, "--timeout", "5s").want(t, 1, "Authorization Violation", "--nats-nkey <data-dir>/nats.nk")

	// The README's worker (here the external-worker example, whose tool
	// only it serves): from the api's directory, --nats only.
	w := harness.StartIn(t, be.Home, "word-count", b.ExternalWorker, []string{"MCPQ_DATA_DIR=", "MCPQ_NATS_NKEY=", "MCPQ_PREFIX="},
		"--nats", be.NATSURL, "--log-json")
	w.WaitOutput(t, "worker running", 30*time.Second)
	res, err := harness.NewClient(mcpURL, false).CallTool(t.Context(), "word_count", map[string]any{"text": "one two three"})
	if err != nil || !strings.Contains(string(res["structuredContent"]), `"words":3`) {
		t.Fatalf("word_count through the joined worker: %s %v", res["structuredContent"], err)
	}

	cli(be.Home, "tasks", "list", "--nats", be.NATSURL).want(t, 0, "word_count", "completed")
	cli(t.TempDir(), "tools", "list", "--nats", be.NATSURL, "--data-dir", filepath.Join(be.Home, "data")).want(t, 0, "word_count")
}

// The embedded NATS is not opened to the network on the generated key: a
// non-loopback --nats-listen without named credentials stops the api at
// start, saying what to pass.
func TestAllInOneNATSListenNeedsCredentials(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.API, "--listen", "127.0.0.1:0", "--nats-listen", "0.0.0.0:0", "--data-dir", filepath.Join(t.TempDir(), "data"))
	cmd.Env = append(os.Environ(), "NATS_URL=", "MCPQ_NATS_NKEY=", "MCPQ_NATS_USER=", "MCPQ_NATS_TOKEN=")
	out, err := cmd.CombinedOutput()
	code, ok := exitStatus(ctx, err)
	if !ok || code == 0 {
		t.Fatalf("api with --nats-listen 0.0.0.0:0: exit %d (%v)\n%s", code, err, out)
	}
	for _, s := range []string{"refusing to open the embedded NATS to the network on --nats-listen 0.0.0.0:0", "--nats-nkey FILE"} {
		if !strings.Contains(string(out), s) {
			t.Errorf("api output does not say %q:\n%s", s, out)
		}
	}
}
