package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// TestConcurrentStartOnCluster: an api and four workers started at the same
// moment against a fresh three-node NATS cluster with three replicas (a
// deployment rolling out, a fleet scaling up) all come up and serve: none
// gives up while the others create and configure the same stream, buckets
// and consumers.
func TestConcurrentStartOnCluster(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	logDir := harness.LogDir(t)
	cl := harness.NewNATSCluster(t, b, logDir, 3)
	be := harness.NATSBackend(cl.URLs())
	const prefix = "ccstart"
	env := []string{"MCPQ_NATS_REPLICAS=3"}
	common := append(append([]string{}, be.Args...), "--prefix", prefix, "--log-json")
	port := harness.FreePort(t)
	start := time.Now()
	// --inline-wait -1s: the 10 ms task below gets a handle, not its result inline.
	api := harness.StartLogged(t, logDir, "api", b.API, env, append(common, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--inline-wait", "-1s")...)
	var workers []*harness.Proc
	for _, name := range []string{"w1", "w2", "w3", "w4"} {
		workers = append(workers, harness.StartLogged(t, logDir, name, b.Worker, env, common...))
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	harness.Eventually(t, 60*time.Second, func() (bool, string) {
		for _, p := range append([]*harness.Proc{api}, workers...) {
			if p.Exited() {
				t.Fatalf("%s gave up while starting with the others:\n%s", p.Name, p.Output())
			}
		}
		for _, w := range workers {
			if !strings.Contains(w.Output(), "worker running") {
				return false, w.Name + " is not running yet"
			}
		}
		code, body := harness.Get(base + "/readyz")
		return code == http.StatusOK, fmt.Sprintf("api /readyz: %d %.300q", code, body)
	})
	t.Logf("an api and four workers started together on a fresh R3 cluster were all up %s later", time.Since(start).Round(100*time.Millisecond))
	c := harness.NewClient(base+"/mcp", true)
	id := c.StartTask(t, "wait", map[string]any{"ms": 10})
	c.WaitStatus(t, id, 20*time.Second, "completed")
}
