package helmtest

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
)

// The real api and worker, started with the environment the chart gives
// their containers (defaults.yaml; a local NATS for NATS_URL, the Secret's
// values for secret references, and loopback ports instead of the pod's),
// answer their probes: the liveness path 200 at once, the readiness path
// 200 once a worker has published its tools, both on the admin listener the
// probes name; /metrics is there too and not on the api's public port.
func TestProbesServed(t *testing.T) {
	_, dir := builtBinaries(t)
	r := render(t, "defaults")
	ns := natstest.Start(t)
	secret := map[string]string{}
	for _, s := range r.of("Secret") {
		for k, v := range s.Object["stringData"].(map[string]any) {
			secret[k] = fmt.Sprint(v)
		}
	}
	secret["NATS_URL"] = ns.URL()

	type started struct {
		d                   *appsv1.Deployment
		admin, public       string // loopback base URLs
		liveness, readiness string
	}
	var procs []started
	for _, d := range r.deployments(t) {
		c := d.Spec.Template.Spec.Containers[0]
		s := started{d: d, liveness: c.LivenessProbe.HTTPGet.Path, readiness: c.ReadinessProbe.HTTPGet.Path}
		var env []string
		for _, e := range c.Env {
			v := e.Value
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				v = secret[e.ValueFrom.SecretKeyRef.Key]
			}
			switch e.Name {
			case "MCPQ_ADMIN", "MCPQ_LISTEN":
				addr := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
				v = addr
				if e.Name == "MCPQ_ADMIN" {
					s.admin = "http://" + addr
				} else {
					s.public = "http://" + addr
				}
			case "MCPQ_PREFIX":
				v = "helmprobe"
			}
			env = append(env, e.Name+"="+v)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, filepath.Join(dir, component(d)))
		cmd.Env = env
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cancel()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("---- %s output ----\n%s", d.Name, out.String())
			}
		})
		procs = append(procs, s)
	}
	for _, p := range procs {
		if p.admin == "" {
			t.Fatalf("%s: no MCPQ_ADMIN: the probes' port serves nothing", p.d.Name)
		}
		poll(t, p.d.Name, p.admin+p.liveness, 20*time.Second)
		poll(t, p.d.Name, p.admin+p.readiness, 40*time.Second)
		poll(t, p.d.Name, p.admin+"/metrics", 5*time.Second)
		if p.public != "" {
			if code, _ := harness.Get(p.public + "/metrics"); code != http.StatusNotFound {
				t.Errorf("%s: /metrics on the public port answers %d; with --admin it belongs to the admin port", p.d.Name, code)
			}
			poll(t, p.d.Name, p.public+"/readyz", 5*time.Second) // load balancers probe the public port
		}
	}
}

// poll waits until GET url answers 200.
func poll(t *testing.T, who, url string, within time.Duration) {
	t.Helper()
	harness.Eventually(t, within, func() (bool, string) {
		code, body := harness.Get(url)
		return code == http.StatusOK, fmt.Sprintf("%s: GET %s: %d %q", who, url, code, body)
	})
}
