package harness

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// APIEnv is API with a process name (for logs) and extra environment
// variables for the api process, for example a shared MCPQ_STATE_KEY for
// replicas behind one load balancer.
func APIEnv(t testing.TB, b *Bins, be Backend, prefix, name string, env []string, extra ...string) (mcpURL string, p *Proc) {
	t.Helper()
	return APILogged(t, b, be, prefix, name, "", env, extra...)
}

// APILogged is APIEnv with the output also in <logDir>/<name>.log (logDir
// "": only in memory). Unless extra sets --inline-wait, the api hands out a
// task handle for every task-capable call (--inline-wait -1s).
func APILogged(t testing.TB, b *Bins, be Backend, prefix, name, logDir string, env []string, extra ...string) (mcpURL string, p *Proc) {
	t.Helper()
	port := FreePort(t)
	args := append(append([]string{}, be.Args...), "--prefix", prefix, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-json")
	if !slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, "--inline-wait") }) {
		// Most tests look at the task a call starts, so they get its handle
		// even for a tool that finishes at once; the tests of adaptive
		// completion, of the clients and of conformance pass their own.
		args = append(args, "--inline-wait", "-1s")
	}
	if logDir == "" {
		p = Start(t, name, b.API, env, append(args, extra...)...)
	} else {
		p = StartLogged(t, logDir, name, b.API, env, append(args, extra...)...)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	Eventually(t, 20*time.Second, func() (bool, string) {
		if p.Exited() {
			t.Fatalf("%s exited:\n%s", name, p.Output())
		}
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return base + "/mcp", p
}
