package integration

// Resources served by workers, end to end on real processes: a 2025-11-25
// session subscribes to resources (resources/subscribe on one api replica),
// opens its GET stream (on the other), and a worker's report that a
// resource changed (Call.ResourceUpdated in the conformance fixture
// test_touch_resource) reaches exactly the sessions subscribed to it.

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// sessionStream is an open GET stream of a 2025-11-25 session: the
// notifications it carries arrive on events.
type sessionStream struct {
	events chan string // notification methods and params, "method uri"
	cancel context.CancelFunc
}

func openSessionStream(t *testing.T, url, session string) *sessionStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		t.Fatalf("GET stream: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sessionStream{events: make(chan string, 16), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			d, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m struct {
				Method string `json:"method"`
				Params struct {
					URI string `json:"uri"`
				} `json:"params"`
			}
			if json.Unmarshal([]byte(d), &m) == nil {
				s.events <- m.Method + " " + m.Params.URI
			}
		}
		close(s.events)
	}()
	return s
}

// next returns the stream's next notification, failing after 20 s.
func (s *sessionStream) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case e, ok := <-s.events:
		if !ok {
			t.Fatalf("%s: the stream ended", what)
		}
		return e
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no notification within 20s", what)
		return ""
	}
}

func TestResourceSubscriptions(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		s.conformanceWorker(t, "conformance-worker", "--concurrency", "64")
		urlA := s.mcpURL
		urlB, _ := harness.APIEnv(t, s.bins, s.be, s.prefix, "api-2", nil) // subscriptions live in the store

		a := initializeLegacy(t, urlA, "subscriber-a")
		b := initializeLegacy(t, urlA, "subscriber-b")
		c := initializeLegacy(t, urlA, "toucher") // its calls make the worker report changes
		var read struct {
			Contents []struct{ URI, Text string } `json:"contents"`
		}
		a.call(urlB, "resources/read", map[string]any{"uri": "test://watched-resource"}, &read)
		if len(read.Contents) != 1 || read.Contents[0].Text != "Watched resource content" {
			t.Fatalf("resources/read: %+v", read)
		}
		a.call(urlA, "resources/subscribe", map[string]any{"uri": "test://watched-resource"}, nil)
		a.call(urlA, "resources/subscribe", map[string]any{"uri": "test://static-text"}, nil)
		b.call(urlA, "resources/subscribe", map[string]any{"uri": "test://static-text"}, nil)
		if r := b.try(urlA, "resources/subscribe", map[string]any{"uri": "test://nowhere"}); r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("subscribing to an unknown resource: %+v", r)
		}
		streamA := openSessionStream(t, urlB, a.id) // on the replica that did not take the subscriptions
		streamB := openSessionStream(t, urlB, b.id)

		touch := func(uri string) {
			t.Helper()
			var res json.RawMessage
			c.call(urlA, "tools/call", map[string]any{"name": "test_touch_resource", "arguments": map[string]any{"uri": uri}}, &res)
		}
		// The stream subscribes to the bus before it answers; a touch made
		// once both answered reaches them.
		touch("test://watched-resource")
		if e := streamA.next(t, "A after touching watched-resource"); e != "notifications/resources/updated test://watched-resource" {
			t.Fatalf("A got %q", e)
		}
		touch("test://static-text")
		for name, st := range map[string]*sessionStream{"A": streamA, "B": streamB} {
			// B is not subscribed to watched-resource: its first
			// notification is static-text's.
			if e := st.next(t, name+" after touching static-text"); e != "notifications/resources/updated test://static-text" {
				t.Fatalf("%s got %q, want static-text's update", name, e)
			}
		}

		a.call(urlB, "resources/unsubscribe", map[string]any{"uri": "test://watched-resource"}, nil)
		touch("test://watched-resource") // A no longer hears this one…
		touch("test://static-text")      // …so this is its next
		if e := streamA.next(t, "A after unsubscribing"); e != "notifications/resources/updated test://static-text" {
			t.Fatalf("A got %q after unsubscribing from watched-resource", e)
		}

		// A deleted session's stream ends.
		req, _ := http.NewRequest(http.MethodDelete, urlA, nil)
		req.Header.Set("Mcp-Session-Id", b.id)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("DELETE session: %v %v", resp, err)
		}
		touch("test://static-text")
		deadline := time.After(30 * time.Second)
		for {
			select {
			case _, ok := <-streamB.events:
				if !ok {
					return
				}
			case <-deadline:
				t.Fatal("the deleted session's stream is still open")
			}
		}
	})
}
