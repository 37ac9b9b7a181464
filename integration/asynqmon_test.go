package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// asynqmon, mounted in api, shows the queues of a running system: its page
// loads and its queue API lists our queue with the job we left in it.
func TestAsynqmonShowsQueues(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "asynq", "--asynqmon", "--asynqmon-read-only")
	base := strings.TrimSuffix(s.mcpURL, "/mcp")

	// A long task keeps a job active in the queue where asynqmon can see it.
	s.worker(t, "worker")
	c := harness.NewClient(s.mcpURL, true)
	c.StartTask(t, "wait", map[string]any{"ms": 60000})

	page := get(t, base+"/asynqmon/")
	if !strings.Contains(page, "<html") && !strings.Contains(page, "<!DOCTYPE html") {
		t.Fatalf("asynqmon page is not HTML: %.200s", page)
	}

	var queues struct {
		Queues []struct {
			Queue  string `json:"queue"`
			Size   int    `json:"size"`
			Active int    `json:"active"`
		} `json:"queues"`
	}
	harness.Eventually(t, 20*time.Second, func() (bool, string) {
		body := get(t, base+"/asynqmon/api/queues")
		if err := json.Unmarshal([]byte(body), &queues); err != nil {
			return false, "undecodable queue list: " + body
		}
		want := s.prefix + ".pool.default" // asynqbroker.PoolQueueName: the worker's pool's queue
		for _, q := range queues.Queues {
			if q.Queue == want && q.Active >= 1 {
				return true, ""
			}
		}
		return false, "queue " + want + " with an active job not listed: " + body
	})
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %.300s", url, resp.Status, b)
	}
	return string(b)
}

// With authentication on, asynqmon answers --console-admins only: no token
// gets 401, another user's token 403, a cross-origin write 403 (the queue
// stays unpaused), while an admin reads the queues, the active job's
// arguments among them, and pauses a queue from the same origin. Without
// --console-admins the api refuses to start.
func TestAsynqmonAuth(t *testing.T) {
	t.Parallel()
	s := newAuthSystem(t, "asynq", jwtauth.RS256, "--asynqmon", "--console-admins", "ops-admin")
	base := strings.TrimSuffix(s.mcpURL, "/mcp")
	s.worker(t, "worker")
	alice := s.token(t, "alice")
	id := authClient(s.mcpURL, alice).StartTask(t, "wait", map[string]any{"ms": 60000})
	queue := s.prefix + ".pool.default" // the worker's pool's queue
	active := base + "/asynqmon/api/queues/" + queue + "/active_tasks"

	call := func(method, url, token, origin string) (int, string) {
		req := must(http.NewRequestWithContext(t.Context(), method, url, nil))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, body := do(t, req)
		return resp.StatusCode, string(body)
	}
	admin := s.token(t, "ops-admin")
	harness.Eventually(t, 20*time.Second, func() (bool, string) {
		code, body := call("GET", active, admin, "")
		return code == 200 && strings.Contains(body, id), fmt.Sprintf("GET active_tasks as the admin: %d %.300s", code, body)
	})
	for _, c := range []struct {
		method, url, token, origin string
		want                       int
	}{
		{"GET", active, "", "", 401},
		{"GET", base + "/asynqmon/", "", "", 401},
		{"GET", active, alice, "", 403},
		{"POST", base + "/asynqmon/api/queues/" + queue + ":pause", alice, "", 403},
		{"POST", base + "/asynqmon/api/queues/" + queue + ":pause", "", "http://evil.example", 403},
		{"POST", base + "/asynqmon/api/queues/" + queue + ":pause", admin, "http://evil.example", 403},
	} {
		if code, body := call(c.method, c.url, c.token, c.origin); code != c.want || strings.Contains(body, id) {
			t.Errorf("%s %s (token %t, origin %q): %d %.200s, want %d", c.method, c.url, c.token != "", c.origin, code, body, c.want)
		}
	}
	paused := func() bool {
		_, body := call("GET", base+"/asynqmon/api/queues", admin, "")
		var qs struct {
			Queues []struct {
				Queue  string `json:"queue"`
				Paused bool   `json:"paused"`
			} `json:"queues"`
		}
		if err := json.Unmarshal([]byte(body), &qs); err != nil {
			t.Fatalf("queue list: %v: %.300s", err, body)
		}
		for _, q := range qs.Queues {
			if q.Queue == queue {
				return q.Paused
			}
		}
		t.Fatalf("queue %s not listed: %.300s", queue, body)
		return false
	}
	if paused() {
		t.Fatal("a refused request paused the queue")
	}
	if code, body := call("POST", base+"/asynqmon/api/queues/"+queue+":pause", admin, base); code != 204 || !paused() {
		t.Fatalf("same-origin pause as the admin: %d %s", code, body)
	}

	p := harness.Start(t, "api", s.bins.API, nil, append(append([]string{}, s.be.Args...), "--log-json", "--asynqmon",
		"--auth-jwks-url", s.iss.JWKSURL, "--auth-issuer", s.iss.URL, "--public-url", "http://127.0.0.1:1")...)
	harness.Eventually(t, 10*time.Second, func() (bool, string) { return p.Exited(), "api still running with --asynqmon and no console admins" })
	if out := p.Output(); !strings.Contains(out, "--asynqmon with authentication on needs --console-admins") {
		t.Fatalf("api output:\n%s", out)
	}
}
