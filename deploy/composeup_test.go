package deploy_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// docker-compose.yml comes up, one profile at a time, on the images
// scripts/images.sh built (deploy/compose.offline.yml): a task sent to the
// load balancer completes, Prometheus scrapes every api and worker, and
// `down -v` takes it all away. MCPQ_COMPOSE names the compose client
// (default docker-compose, the 1.29 CI runs; "docker compose" works too).
func TestComposeUp(t *testing.T) {
	e := newEngine(t)
	compose := strings.Fields(os.Getenv("MCPQ_COMPOSE"))
	if len(compose) == 0 {
		compose = []string{"docker-compose"}
	}
	if _, err := exec.LookPath(compose[0]); err != nil {
		need(t, compose[0]+" is not on PATH (Debian package docker-compose)")
	}
	for _, profile := range []string{"nats", "asynq"} { // one after the other: they share lb and prometheus
		t.Run(profile, func(t *testing.T) {
			e := &engine{t: t, env: e.env}
			ports := map[string]int{"MCPQ_LB_PORT": harness.FreePort(t), "MCPQ_LB_STATS_PORT": harness.FreePort(t), "MCPQ_PROMETHEUS_PORT": harness.FreePort(t), "MCPQ_ASYNQMON_PORT": harness.FreePort(t)}
			env := []string{"MCPQ_STATE_KEY=" + randomHex(t, 32)}
			for k, v := range ports {
				env = append(env, fmt.Sprintf("%s=%d", k, v))
			}
			up := func(args ...string) (string, error) {
				all := append([]string{"-p", "mcpqtest" + profile, "-f", "docker-compose.yml", "-f", "deploy/compose.offline.yml", "--profile", profile}, args...)
				return e.run(env, compose[0], append(compose[1:], all...)...)
			}
			_, _ = up("down", "-v", "--remove-orphans") // what a killed run left
			t.Cleanup(func() {
				if t.Failed() {
					logs, _ := up("logs", "--no-color", "--tail=30")
					t.Logf("--- compose logs:\n%s", logs)
				}
				if out, err := up("down", "-v", "--remove-orphans"); err != nil {
					t.Errorf("compose down -v: %v\n%s", err, out)
				}
			})
			start := time.Now()
			if out, err := up("up", "-d", "--no-build"); err != nil {
				t.Fatalf("compose --profile %s up: %v\n%s", profile, err, out)
			}
			t.Logf("up in %s", time.Since(start).Round(time.Second))
			// docker-compose runs exactly the services compose-go sees in the profile.
			running := e.must("ps", "-a", "--filter", "label=com.docker.compose.project=mcpqtest"+profile, "--format", `{{.Label "com.docker.compose.service"}}`)
			if got := slices.Sorted(slices.Values(strings.Fields(running))); !slices.Equal(got, profiles[profile].all()) {
				t.Errorf("profile %s runs %v, want %v", profile, got, profiles[profile].all())
			}

			lb := fmt.Sprintf("http://127.0.0.1:%d", ports["MCPQ_LB_PORT"])
			c := harness.NewClient(lb+"/mcp", true)
			// Up once the api answers and a worker has published its tools
			// (on the NATS cluster the workers come up after the api).
			harness.Eventually(t, 2*time.Minute, func() (bool, string) {
				var list struct {
					Tools []struct {
						Name string `json:"name"`
					} `json:"tools"`
				}
				err := c.Call(context.Background(), "tools/list", nil, &list)
				for _, tool := range list.Tools {
					if tool.Name == "render_report" {
						return true, ""
					}
				}
				return false, fmt.Sprintf("tools/list through the load balancer: %d tools, no render_report (%v)", len(list.Tools), err)
			})
			// ... and once HAProxy has both replicas in: it counts a server up
			// until its first check fails, so a replica that answered a call
			// while starting can still drop out for a few seconds after it.
			lbServesBoth(t, ports["MCPQ_LB_STATS_PORT"])
			id := c.StartTask(t, "render_report", map[string]any{"title": "compose " + profile, "pages": 2})
			task := c.WaitStatus(t, id, time.Minute, "completed", "failed", "cancelled")
			if task.Status != "completed" || !strings.Contains(string(task.Result), "2 pages rendered") {
				t.Fatalf("task %s: %s (%s), result %s", id, task.Status, task.StatusMessage, task.Result)
			}
			t.Logf("task through the load balancer done %s after up", time.Since(start).Round(time.Second))

			prometheusScrapesAll(t, ports["MCPQ_PROMETHEUS_PORT"])
			if profile == "asynq" {
				url := fmt.Sprintf("http://127.0.0.1:%d/asynqmon/", ports["MCPQ_ASYNQMON_PORT"])
				harness.Eventually(t, time.Minute, func() (bool, string) {
					code, body := harness.Get(url)
					return code == http.StatusOK, fmt.Sprintf("GET %s: %d %.300q", url, code, body)
				})
			}
		})
	}
}

// lbServesBoth waits until HAProxy's stats (deploy/haproxy.cfg, /stats;csv)
// show both api replicas UP with their last health check passed (L7OK).
func lbServesBoth(t *testing.T, port int) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/stats;csv", port)
	harness.Eventually(t, time.Minute, func() (bool, string) {
		code, body := harness.Get(url)
		if code != http.StatusOK {
			return false, fmt.Sprintf("GET %s: %d %.300q", url, code, body)
		}
		rows, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(body, "# "))).ReadAll()
		if err != nil || len(rows) == 0 {
			return false, fmt.Sprintf("GET %s: not CSV (%v): %.300q", url, err, body)
		}
		col := map[string]int{}
		for i, name := range rows[0] {
			col[name] = i
		}
		var seen []string
		up := 0
		for _, r := range rows[1:] {
			if len(r) != len(rows[0]) || r[col["pxname"]] != "api" || !strings.HasPrefix(r[col["svname"]], "api-") {
				continue
			}
			seen = append(seen, r[col["svname"]]+": "+r[col["status"]]+" "+r[col["check_status"]])
			if r[col["status"]] == "UP" && r[col["check_status"]] == "L7OK" {
				up++
			}
		}
		return up == 2, fmt.Sprintf("HAProxy's api servers %q, want api-1 and api-2 UP L7OK", seen)
	})
}

// prometheusScrapesAll waits until Prometheus reports every target of
// deploy/prometheus.yml (both api replicas, both workers) up.
func prometheusScrapesAll(t *testing.T, port int) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/api/v1/targets", port)
	harness.Eventually(t, 90*time.Second, func() (bool, string) { // the scrape interval is 15s
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		var body struct {
			Data struct {
				ActiveTargets []struct {
					Labels    map[string]string `json:"labels"`
					Health    string            `json:"health"`
					LastError string            `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return false, fmt.Sprintf("GET %s: %s: %v", url, resp.Status, err)
		}
		var up, all []string
		for _, tg := range body.Data.ActiveTargets {
			s := tg.Labels["job"] + "/" + tg.Labels["instance"] + ": " + tg.Health + " " + tg.LastError
			all = append(all, s)
			if tg.Health == "up" {
				up = append(up, s)
			}
		}
		return len(up) == 4 && len(all) == 4, fmt.Sprintf("prometheus targets %q, want the 4 of deploy/prometheus.yml up", all)
	})
}
