package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// The api's shutdown as a Kubernetes Service or a load balancer needs it
// (cmd/api/lifecycle.go): with --admin, /metrics is served there and not on
// the public port, /healthz and /readyz on both. On SIGTERM /readyz turns 503
// while the listener still answers; after --shutdown-delay the listener
// closes, and an inline call in flight still gets its result (the drain);
// past --shutdown-timeout a call still waiting gets a "shutting down" error
// rather than a cut connection. The lifecycle is the same on both brokers:
// this runs on NATS only.
func TestAPIShutdown(t *testing.T) {
	t.Parallel()
	t.Run("drain", func(t *testing.T) {
		t.Parallel()
		s, w, admin := lifecycleSystem(t, "--shutdown-delay", "2s", "--shutdown-timeout", "30s")
		api := strings.TrimSuffix(s.mcpURL, "/mcp")
		if code, _ := harness.Get(api + "/metrics"); code != http.StatusNotFound {
			t.Errorf("public /metrics with --admin: %d, want 404", code)
		}
		if code, body := harness.Get(admin + "/metrics"); code != 200 || !strings.Contains(body, "mcpq_queue_depth") {
			t.Errorf("admin /metrics: %d, want 200 with the api's metrics", code)
		}

		// An inline call (client without tasks) that outlasts the delay.
		c := harness.NewClient(s.mcpURL, false)
		type outcome struct {
			text string
			err  error
			at   time.Time
		}
		done := make(chan outcome, 1)
		go func() {
			res, err := c.CallTool(context.Background(), "slow_compute", map[string]any{"seconds": 5, "label": "drain"})
			o := outcome{err: err, at: time.Now()}
			if err == nil {
				o.text = string(res["content"])
			}
			done <- o
		}()
		w.WaitOutput(t, `"message":"task running"`, 20*time.Second)

		stopped := make(chan error, 1)
		go func() { stopped <- s.api.Stop(60 * time.Second) }()
		var notReady, refused time.Time
		harness.Eventually(t, 30*time.Second, func() (bool, string) {
			code, body, err := probe(api + "/readyz")
			switch {
			case err != nil && errors.Is(err, syscall.ECONNREFUSED):
				refused = time.Now()
				return true, ""
			case err != nil:
				return false, err.Error()
			case code == http.StatusServiceUnavailable && strings.Contains(body, "shutting down"):
				if notReady.IsZero() {
					notReady = time.Now()
					if code, body, _ := probe(admin + "/readyz"); code != http.StatusServiceUnavailable {
						t.Errorf("admin /readyz while shutting down: %d %q, want 503", code, body)
					}
				}
			case !notReady.IsZero():
				t.Errorf("public /readyz after it said shutting down: %d %q", code, body)
			}
			return false, fmt.Sprintf("/readyz %d %q: the listener is still open", code, body)
		})
		if notReady.IsZero() {
			t.Fatal("the listener closed without /readyz ever answering 503 shutting down")
		}
		t.Logf("503 for %s before the listener closed", refused.Sub(notReady).Round(time.Millisecond))

		var o outcome
		select {
		case o = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the in-flight inline call got no answer")
		}
		if o.err != nil || !strings.Contains(o.text, "drain: computed for 5 s") {
			t.Fatalf("in-flight inline call: %v %s; want its result", o.err, o.text)
		}
		if !o.at.After(refused) {
			t.Errorf("the call ended before the listener closed: nothing was drained")
		}
		if err := <-stopped; err != nil {
			t.Errorf("api exit: %v\n%s", err, s.api.Output())
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		s, w, _ := lifecycleSystem(t, "--shutdown-delay", "200ms", "--shutdown-timeout", "1s")
		c := harness.NewClient(s.mcpURL, false)
		errc := make(chan error, 1)
		go func() {
			_, err := c.CallTool(context.Background(), "slow_compute", map[string]any{"seconds": 60, "label": "cut"})
			errc <- err
		}()
		w.WaitOutput(t, `"message":"task running"`, 20*time.Second)
		start := time.Now()
		if err := s.api.Stop(30 * time.Second); err != nil {
			t.Errorf("api exit: %v", err)
		}
		t.Logf("api exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
		var rerr *harness.RPCError
		if err := <-errc; !errors.As(err, &rerr) || !strings.Contains(rerr.Message, "shutting down") {
			t.Fatalf("call still waiting past --shutdown-timeout: %v; want a JSON-RPC error saying the server is shutting down", err)
		}
	})
}

// lifecycleSystem is an api on NATS with --admin and the given flags, and a
// conformance worker, once the api is ready. It returns the admin base URL.
func lifecycleSystem(t *testing.T, args ...string) (*system, *harness.Proc, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	s := newSystem(t, "nats", append([]string{"--admin", addr}, args...)...)
	w := s.conformanceWorker(t, "worker")
	api := strings.TrimSuffix(s.mcpURL, "/mcp")
	for _, u := range []string{api, "http://" + addr} {
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			code, body := harness.Get(u + "/readyz")
			return code == 200, fmt.Sprintf("%s/readyz: %d %s", u, code, body)
		})
	}
	return s, w, "http://" + addr
}

// probe is one GET on a new connection, keeping the error.
func probe(url string) (int, string, error) {
	cl := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}
