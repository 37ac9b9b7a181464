// Package deploy_test checks the docker compose deployment. Without a Docker
// engine: docker-compose.yml is loaded, validated against the compose schema
// and interpolated by compose-go (the library `docker compose config` is
// built on), and then held against what a schema cannot see: the Dockerfile
// and its targets, the flags and environment the real binaries accept, the
// HAProxy, Prometheus and NATS configs, and Redis's durability settings;
// haproxy and promtool check their configs. With one (MCPQ_DOCKER_HOST), the
// images scripts/images.sh built are started, alone and with the compose file
// (images_test.go, composeup_test.go).
package deploy_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// layout is what one profile runs. apis are the replicas behind the load
// balancer, workers the demo workers, backend the broker's own services.
type layout struct {
	apis, workers, backend, other []string
}

var profiles = map[string]layout{
	"nats": {
		apis: []string{"api-1", "api-2"}, workers: []string{"worker-1", "worker-2"},
		backend: []string{"nats-1", "nats-2", "nats-3"}, other: []string{"lb", "prometheus"},
	},
	"asynq": {
		apis: []string{"asynq-api-1", "asynq-api-2"}, workers: []string{"asynq-worker-1", "asynq-worker-2"},
		backend: []string{"redis"}, other: []string{"asynqmon", "lb", "prometheus"},
	},
}

func (l layout) all() []string {
	return slices.Sorted(slices.Values(slices.Concat(l.apis, l.workers, l.backend, l.other)))
}

// testEnv is the shell environment the file is interpolated with; nothing
// from the environment running the test leaks in.
var testEnv = map[string]string{"MCPQ_STATE_KEY": "compose-test-state-key"}

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd) // this package is deploy/ at the module root
}

// load reads docker-compose.yml the way `docker compose --profile p config`
// does: schema validation, interpolation, normalization, consistency checks.
func load(t *testing.T, env map[string]string, profiles ...string) (*types.Project, error) {
	t.Helper()
	root := repoRoot(t)
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithEnv(list), cli.WithProfiles(profiles))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return opts.LoadProject(ctx)
}

func mustLoad(t *testing.T, profiles ...string) *types.Project {
	t.Helper()
	p, err := load(t, testEnv, profiles...)
	if err != nil {
		t.Fatalf("docker compose --profile %s config: %v", strings.Join(profiles, ","), err)
	}
	return p
}

// Each profile loads and starts exactly its services, and every service it
// starts finds the services it depends on (what `docker compose up` walks).
func TestComposeProfiles(t *testing.T) {
	for name, want := range profiles {
		p := mustLoad(t, name)
		if got := p.ServiceNames(); !slices.Equal(slices.Sorted(slices.Values(got)), want.all()) {
			t.Errorf("profile %s runs %v, want %v", name, slices.Sorted(slices.Values(got)), want.all())
		}
		err := p.ForEachService(p.ServiceNames(), func(string, *types.ServiceConfig) error { return nil }, types.IncludeDependencies)
		if err != nil {
			t.Errorf("profile %s: docker compose up would fail: %v", name, err)
		}
	}
	// The api replicas must share a secret: no default for it.
	_, err := load(t, nil, "nats")
	if err == nil || !strings.Contains(err.Error(), "MCPQ_STATE_KEY") {
		t.Errorf("without MCPQ_STATE_KEY the file loads (%v); want an error naming it", err)
	}
}

// Every service is pinned and built or pulled from somewhere that exists,
// keeps running, says when it is healthy, and publishes to loopback only.
func TestComposeServices(t *testing.T) {
	root := repoRoot(t)
	p := mustLoad(t, "*")
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	for _, s := range p.Services {
		if s.Build != nil {
			if s.Build.Context != root {
				t.Errorf("%s: build context %s, want the repository root", s.Name, s.Build.Context)
			}
			if s.Build.Dockerfile != "Dockerfile" {
				t.Errorf("%s: builds %s, want the Dockerfile at the root", s.Name, s.Build.Dockerfile)
			}
			if _, ok := stages.byName[s.Build.Target]; !ok || s.Build.Target == "" {
				t.Errorf("%s: build target %q is not a stage of the Dockerfile (stages %v)", s.Name, s.Build.Target, stages.names())
			}
			if s.Image == "" {
				t.Errorf("%s: a built service needs an image name, so its replicas share one image", s.Name)
			}
		} else if !pinned(s.Image) {
			t.Errorf("%s: image %q is not pinned to a version", s.Name, s.Image)
		}
		if s.Restart != "unless-stopped" && s.Restart != "always" {
			t.Errorf("%s: restart %q; a crashed process should come back", s.Name, s.Restart)
		}
		if s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) < 2 {
			t.Errorf("%s: no health check", s.Name)
		}
		for _, port := range s.Ports {
			if ip := net.ParseIP(port.HostIP); ip == nil || !ip.IsLoopback() {
				t.Errorf("%s: port %d published on %q; publish on 127.0.0.1 only (no auth in this file)", s.Name, port.Target, port.HostIP)
			}
		}
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if !strings.HasPrefix(v.Source, root+string(filepath.Separator)) || !v.ReadOnly {
				t.Errorf("%s: bind mount %s should be a read-only file of this repository", s.Name, v.Source)
			} else if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s: bind mount: %v", s.Name, err)
			}
		}
	}
}

// pinned reports whether an image reference names a version tag.
func pinned(image string) bool {
	_, tag, ok := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	return ok && tag != "" && tag != "latest" && strings.ContainsAny(tag, "0123456789")
}

// The NATS nodes run the server version the tests run (go.mod).
func TestComposeNATSVersion(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(repoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/nats-io/nats-server/v2 v(\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod requires no nats-server")
	}
	p := mustLoad(t, "nats")
	for _, name := range profiles["nats"].backend {
		s := p.Services[name]
		if want := "nats:" + string(m[1]) + "-alpine"; s.Image != want {
			t.Errorf("%s runs %s; the tests run nats-server v%s (want %s)", name, s.Image, m[1], want)
		}
	}
}

// The api and worker services build the right Dockerfile targets, their
// health checks reach the ports they listen on, and they wait for a healthy
// backend. Workers get time to drain on stop.
func TestComposeAppServices(t *testing.T) {
	root := repoRoot(t)
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	for name, l := range profiles {
		p := mustLoad(t, name)
		check := func(svc, target, portVar string) {
			s := p.Services[svc]
			if s.Build == nil || s.Build.Target != target {
				t.Errorf("%s: want build target %s", svc, target)
				return
			}
			port := envPort(t, s, portVar)
			url := s.HealthCheck.Test[len(s.HealthCheck.Test)-1]
			if want := fmt.Sprintf("http://127.0.0.1:%d/readyz", port); url != want {
				t.Errorf("%s: health check probes %s, want %s (%s)", svc, url, want, portVar)
			}
			if bin := s.HealthCheck.Test[1]; !stages.provides(target, bin) {
				t.Errorf("%s: health check runs %s, which the Dockerfile's %s stage does not contain", svc, bin, target)
			}
			for _, dep := range l.backend {
				if d, ok := s.DependsOn[dep]; !ok || d.Condition != types.ServiceConditionHealthy {
					t.Errorf("%s: does not wait for %s to be healthy", svc, dep)
				}
			}
			if v := s.Environment["MCPQ_REQUIRE_DURABLE"]; v == nil || *v != "1" {
				t.Errorf("%s: MCPQ_REQUIRE_DURABLE is not 1: it would start on a backend that loses tasks", svc)
			}
		}
		for _, svc := range l.apis {
			check(svc, "api", "MCPQ_LISTEN")
		}
		for _, svc := range l.workers {
			check(svc, "worker", "MCPQ_ADMIN")
			s := p.Services[svc]
			grace := 25 * time.Second // the worker's --shutdown-grace default
			if v := s.Environment["MCPQ_SHUTDOWN_GRACE"]; v != nil {
				grace, _ = time.ParseDuration(*v)
			}
			if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= grace {
				t.Errorf("%s: stop_grace_period must exceed the shutdown grace %s, or running handlers are killed", svc, grace)
			}
		}
	}
}

// envPort is the port of the host:port address in service s's variable v.
func envPort(t *testing.T, s types.ServiceConfig, v string) int {
	t.Helper()
	addr := s.Environment[v]
	if addr == nil {
		t.Fatalf("%s: no %s", s.Name, v)
	}
	_, port, err := net.SplitHostPort(*addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil {
		t.Fatalf("%s: %s=%q is not host:port", s.Name, v, *addr)
	}
	return n
}

// dnsNames maps each name a service answers to on the default network (its
// own and its aliases) to the service, within one profile.
func dnsNames(t *testing.T, p *types.Project) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(name, svc string) {
		if other, ok := out[name]; ok && other != svc {
			t.Errorf("profile %v: %s and %s both answer to %s", p.Profiles, other, svc, name)
		}
		out[name] = svc
	}
	for _, s := range p.Services {
		add(s.Name, s.Name)
		for _, n := range s.Networks {
			if n != nil {
				for _, a := range n.Aliases {
					add(a, s.Name)
				}
			}
		}
	}
	return out
}

// docs/deploy-compose.md names every service and shows how to start each
// profile.
func TestComposePageNamesEveryService(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "deploy-compose.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, name := range mustLoad(t, "*").ServiceNames() {
		if !strings.Contains(page, "`"+name+"`") {
			t.Errorf("docs/deploy-compose.md does not describe service `%s`", name)
		}
	}
	for name := range profiles {
		if !strings.Contains(page, "--profile "+name) {
			t.Errorf("docs/deploy-compose.md does not show how to start profile %s", name)
		}
	}
}
