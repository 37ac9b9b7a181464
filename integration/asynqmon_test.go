package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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
		want := s.prefix + ".tool.wait" // asynqbroker.QueueName: the tool's own queue
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
