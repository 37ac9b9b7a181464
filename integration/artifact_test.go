package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// TestArtifacts: a 10 MB artifact returned as a resource_link is read back
// by its task's owner with resources/read; another principal gets the answer
// an unknown resource gets; after the task's TTL it is gone, and api tasks
// purge removes another at once.
func TestArtifacts(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		s := newAuthSystem(t, broker, jwtauth.RS256, "--task-ttl", "4s")
		s.worker(t, "worker")
		alice, bob := s.client(t, "alice"), s.client(t, "bob")

		read := func(c *harness.Client, uri string) (string, error) {
			var res struct {
				Contents []struct {
					URI  string `json:"uri"`
					Blob string `json:"blob"`
				} `json:"contents"`
			}
			if err := c.Call(context.Background(), "resources/read", map[string]any{"uri": uri}, &res); err != nil {
				return "", err
			}
			if len(res.Contents) != 1 || res.Contents[0].URI != uri {
				t.Fatalf("resources/read %s: %+v", uri, res)
			}
			data, err := base64.StdEncoding.DecodeString(res.Contents[0].Blob)
			if err != nil {
				t.Fatalf("resources/read %s: blob not base64: %v", uri, err)
			}
			return string(data), nil
		}
		export := func(name string) (string, string) {
			id := alice.StartTask(t, "export", map[string]any{"bytes": 10_000_000, "name": name})
			tk := alice.WaitStatus(t, id, 60*time.Second, "completed", "failed")
			for _, ct := range contents(t, tk.Result) {
				if ct.Type == "resource_link" {
					return id, linkURI(t, tk.Result)
				}
			}
			t.Fatalf("export: no resource_link in %.300s", tk.Result)
			return "", ""
		}
		id, uri := export("report.bin")
		if uri != taskstate.ArtifactURI(id, "report.bin") {
			t.Fatalf("link %q, want %q", uri, taskstate.ArtifactURI(id, "report.bin"))
		}
		got, err := read(alice, uri)
		if err != nil || got != pattern(10_000_000) {
			t.Fatalf("the owner reads the artifact: %d bytes, %v", len(got), err)
		}
		_, errOther := read(bob, uri)
		_, errUnknown := read(bob, taskstate.ArtifactURI(taskstate.NewID(), "report.bin"))
		var ro, ru *harness.RPCError
		if !errors.As(errOther, &ro) || !errors.As(errUnknown, &ru) || ro.Code != ru.Code || !strings.Contains(ro.Message, "Resource not found") {
			t.Fatalf("another principal: %v; an unknown resource: %v; want the same answer", errOther, errUnknown)
		}
		// After the task's TTL (4 s from its end) the artifact is gone.
		harness.Eventually(t, 30*time.Second, func() (bool, string) {
			_, err := read(alice, uri)
			var rpc *harness.RPCError
			return errors.As(err, &rpc) && strings.Contains(rpc.Message, "Resource not found"), "the artifact is still served after the task's TTL"
		})
		// A purge removes another at once.
		_, uri2 := export("again.bin")
		if _, err := read(alice, uri2); err != nil {
			t.Fatal(err)
		}
		s.tasksCLI(t, "purge", "--all").want(t, 0)
		if _, err := read(alice, uri2); err == nil {
			t.Fatal("the artifact of a purged task is still served")
		}
	})
}

// linkURI is the uri of the first resource_link of a result.
func linkURI(t *testing.T, raw []byte) string {
	t.Helper()
	var r struct {
		Content []struct {
			Type string `json:"type"`
			URI  string `json:"uri"`
		} `json:"content"`
	}
	_ = json.Unmarshal(raw, &r)
	for _, c := range r.Content {
		if c.Type == "resource_link" {
			return c.URI
		}
	}
	return ""
}
