package harness

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
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
	p.WaitHealthy(t, base+"/healthz", 20*time.Second)
	return base + "/mcp", p
}

// AllInOne starts the api as `go run ./cmd/api` on a fresh checkout does
// (no --nats: embedded NATS, the demo tools in-process, nothing taken from
// the environment), in a directory of its own (be.Home) where it keeps
// ./data, and waits until it is healthy. be joins its embedded NATS
// (be.NATSURL) with the key in that data dir; its prefix is the default,
// mcpq.
func AllInOne(t testing.TB, b *Bins) (mcpURL string, be Backend, p *Proc) {
	t.Helper()
	port, natsPort := FreePort(t), FreePort(t)
	home := t.TempDir()
	p = StartIn(t, home, "api-all-in-one", b.API,
		[]string{"NATS_URL=", "MCPQ_PREFIX=", "MCPQ_DATA_DIR="}, // nothing from the environment may turn off all-in-one
		"--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--nats-listen", fmt.Sprintf("127.0.0.1:%d", natsPort),
		"--log-json")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p.WaitHealthy(t, base+"/healthz", 30*time.Second)
	url := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	be = Backend{Name: "nats", Args: []string{"--nats", url, "--data-dir", filepath.Join(home, "data")}, Home: home, NATSURL: url}
	return base + "/mcp", be, p
}

// WaitHealthy waits until GET url answers 200, failing the test at once if
// p exits first.
func (p *Proc) WaitHealthy(t testing.TB, url string, within time.Duration) {
	t.Helper()
	Eventually(t, within, func() (bool, string) {
		if p.Exited() {
			t.Fatalf("%s exited:\n%s", p.Name, tail(p.Output(), 8000))
		}
		code, body := Get(url)
		return code == http.StatusOK, fmt.Sprintf("%s: GET %s: %d %.300q", p.Name, url, code, body)
	})
}

// Get GETs url and returns the status code and the body; with no answer, 0
// and the error.
func Get(url string) (code int, body string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
