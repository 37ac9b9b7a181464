package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// engine runs the docker client against the engine MCPQ_DOCKER_HOST names
// (scripts/engine.sh starts one; .ci/run does). DOCKER names the client,
// default docker.
type engine struct {
	t   *testing.T
	env []string // the clients' environment: PATH, HOME, DOCKER_HOST
}

func newEngine(t *testing.T) *engine {
	t.Helper()
	host := os.Getenv("MCPQ_DOCKER_HOST")
	if host == "" {
		need(t, `MCPQ_DOCKER_HOST is not set, so no images are built or started: eval "$(scripts/engine.sh start DIR)" && scripts/images.sh && MCPQ_DOCKER_HOST=$DOCKER_HOST go test ./deploy/`)
	}
	e := &engine{t: t, env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "DOCKER_HOST=" + host}}
	if out, err := e.docker("version", "--format", "{{.Server.Version}}"); err != nil {
		t.Fatalf("MCPQ_DOCKER_HOST=%s: the engine does not answer: %v\n%s", host, err, out)
	}
	return e
}

// run runs a client command within five minutes and returns its output.
func (e *engine) run(env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(e.env, env...)
	cmd.Dir = repoRoot(e.t)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (e *engine) docker(args ...string) (string, error) {
	client := os.Getenv("DOCKER")
	if client == "" {
		client = "docker"
	}
	return e.run(nil, client, args...)
}

// must is docker ARGS..., failing the test if it fails.
func (e *engine) must(args ...string) string {
	e.t.Helper()
	out, err := e.docker(args...)
	if err != nil {
		e.t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// image is what docker image inspect tells of one.
type image struct {
	Config struct {
		User       string
		Entrypoint []string
		Labels     map[string]string
	}
}

func (e *engine) inspect(ref string) image {
	e.t.Helper()
	out, err := e.docker("image", "inspect", ref)
	if err != nil {
		e.t.Fatalf("image %s: %v (scripts/images.sh builds it)\n%s", ref, err, out)
	}
	var imgs []image
	if err := json.Unmarshal([]byte(out), &imgs); err != nil || len(imgs) != 1 {
		e.t.Fatalf("docker image inspect %s: %v\n%s", ref, err, out)
	}
	return imgs[0]
}

// healthy polls `docker exec NAME healthcheck URL`, the compose file's
// health check, until it passes.
func (e *engine) healthy(name, url string, within time.Duration) {
	e.t.Helper()
	harness.Eventually(e.t, within, func() (bool, string) {
		out, err := e.docker("exec", name, "/usr/local/bin/healthcheck", url)
		if err != nil {
			state, _ := e.docker("inspect", "--format", "{{.State.Status}} (exit {{.State.ExitCode}})", name)
			return false, fmt.Sprintf("%s: %s: %s", name, state, out)
		}
		return true, ""
	})
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// The images scripts/images.sh builds are what the Dockerfile says: a
// numeric non-root user, the OCI labels, an entrypoint whose --version
// agrees with the labels, the passwd entry and CA bundle in the file system.
func TestImagesContents(t *testing.T) {
	e := newEngine(t)
	for _, c := range []struct{ ref, entrypoint string }{
		{"mcpqueue/api:local", "/usr/local/bin/api"},
		{"mcpqueue/worker:local", "/usr/local/bin/worker"},
		{"mcpqueue/nats:local", "/usr/local/bin/nats-server"},
	} {
		img := e.inspect(c.ref)
		if img.Config.User != "65532:65532" {
			t.Errorf("%s runs as %q, want 65532:65532", c.ref, img.Config.User)
		}
		if len(img.Config.Entrypoint) != 1 || img.Config.Entrypoint[0] != c.entrypoint {
			t.Errorf("%s: entrypoint %v, want %s", c.ref, img.Config.Entrypoint, c.entrypoint)
		}
		l := img.Config.Labels
		for _, k := range []string{"source", "version", "revision", "created", "title"} {
			if l["org.opencontainers.image."+k] == "" {
				t.Errorf("%s has no label org.opencontainers.image.%s (labels %v)", c.ref, k, l)
			}
		}
		out, err := e.docker("run", "--rm", c.ref, "--version")
		version, revision := l["org.opencontainers.image.version"], l["org.opencontainers.image.revision"]
		if c.ref == "mcpqueue/nats:local" {
			revision = "" // nats-server prints its own version only
		}
		if err != nil || !strings.Contains(out, version) || !strings.Contains(out, revision) {
			t.Errorf("%s --version: %q (%v); want the labels' version %s and revision %s", c.ref, out, err, version, revision)
		}
		id := e.must("create", c.ref)
		for file, want := range map[string]string{"/etc/passwd": "nonroot:x:65532:65532:", "/etc/ssl/certs/ca-certificates.crt": "BEGIN CERTIFICATE"} {
			tarred, err := e.docker("cp", id+":"+file, "-") // a tar stream of the one file
			if err != nil || !strings.Contains(tarred, want) {
				t.Errorf("%s: %s lacks %q (%v)", c.ref, file, want, err)
			}
		}
		e.must("rm", id)
	}
}

// NATS, api and worker containers on a network of their own: a tools/call
// from this test through the api's published port runs as a task on the
// worker and completes. Health is what the compose file checks.
func TestImagesRunATask(t *testing.T) {
	e := newEngine(t)
	name := "mcpq-images-" + randomHex(t, 4)
	e.must("network", "create", name)
	var containers []string
	t.Cleanup(func() {
		for _, c := range containers {
			if t.Failed() {
				logs, _ := e.docker("logs", "--tail", "40", c)
				t.Logf("--- docker logs %s:\n%s", c, logs)
			}
			_, _ = e.docker("rm", "-f", "-v", c)
		}
		_, _ = e.docker("network", "rm", name)
	})
	// run starts one container, known on the network by its role.
	run := func(role string, opts []string, img string, cmd ...string) string {
		c := name + "-" + role
		containers = append(containers, c)
		args := append([]string{"run", "-d", "--name", c, "--network", name, "--network-alias", role}, opts...)
		e.must(append(append(args, img), cmd...)...)
		return c
	}
	nats := run("nats", nil, "mcpqueue/nats:local", "--jetstream", "--store_dir", "/data", "--http_port", "8222")
	e.healthy(nats, "http://127.0.0.1:8222/healthz", 30*time.Second)

	env := func(kv ...string) (opts []string) {
		kv = append(kv, "MCPQ_BROKER=nats", "NATS_URL=nats://nats:4222", "MCPQ_REQUIRE_DURABLE=1", "MCPQ_PREFIX=mcpqimg", "MCPQ_LOG_JSON=1")
		for _, v := range kv {
			opts = append(opts, "-e", v)
		}
		return opts
	}
	api := run("api", append(env("MCPQ_LISTEN=0.0.0.0:8080", "MCPQ_INSECURE_NO_AUTH=1", "MCPQ_STATE_KEY="+randomHex(t, 32)),
		"-p", "127.0.0.1::8080"), "mcpqueue/api:local")
	worker := run("worker", env("MCPQ_ADMIN=0.0.0.0:9091"), "mcpqueue/worker:local")
	e.healthy(api, "http://127.0.0.1:8080/readyz", time.Minute)
	e.healthy(worker, "http://127.0.0.1:9091/readyz", time.Minute)

	addr := e.must("port", api, "8080/tcp") // 127.0.0.1:PORT
	c := harness.NewClient("http://"+strings.Fields(addr)[0]+"/mcp", true)
	id := c.StartTask(t, "render_report", map[string]any{"title": "images", "pages": 2})
	task := c.WaitStatus(t, id, time.Minute, "completed", "failed", "cancelled")
	if task.Status != "completed" || !strings.Contains(string(task.Result), `2 pages rendered`) {
		t.Fatalf("task %s: %s (%s), result %s", id, task.Status, task.StatusMessage, task.Result)
	}
}
