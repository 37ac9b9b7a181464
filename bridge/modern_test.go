package bridge

// The task gateway against a server nobody here wrote (issue #33): the
// reference 2026-07-28 tasks server (internal/peertest), relayed in both
// eras.

import (
	"context"
	"encoding/json"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/peertest"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
)

// relayHTTP relays h with sessions sessions, logging to the test and log.
func relayHTTP(t *testing.T, h HTTPServer, sessions int, log *redistest.SyncBuffer) *relayed {
	t.Helper()
	mux := consumer.NewMux()
	logger := zerolog.New(io.MultiWriter(zerolog.NewTestWriter(t), log)).Level(zerolog.DebugLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := Serve(ctx, mux, h.Dialer(logger), &Options{Logger: logger, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return &relayed{r: r, mux: mux}
}

func startPeerRelay(t *testing.T, url, protocol string, log *redistest.SyncBuffer) *relayed {
	t.Helper()
	return relayHTTP(t, HTTPServer{URL: url, Protocol: protocol}, 2, log)
}

// A tool's own timeout ("tools" in --mcp-config) wins over the server's.
func TestToolTimeouts(t *testing.T) {
	t.Parallel()
	peer := peertest.Start(t)
	mux := consumer.NewMux()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := Start(ctx, mux, []Server{{HTTP: HTTPServer{URL: peer.URL}, Timeout: time.Minute,
		ToolTimeouts: map[string]time.Duration{"slow_compute": 90 * time.Minute}}}, 1, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	got := map[string]int64{}
	for _, info := range mux.Tools() {
		got[info.Name] = info.TimeoutMs
	}
	if got["slow_compute"] != (90*time.Minute).Milliseconds() || got["greet"] != time.Minute.Milliseconds() {
		t.Fatalf("timeouts (ms) %v: want slow_compute's own, the server's for greet", got)
	}
}

func toolNames(x *relayed) map[string]bool {
	names := map[string]bool{}
	for _, info := range x.mux.Tools() {
		names[info.Name] = true
	}
	return names
}

func TestModernUpstreamTasks(t *testing.T) {
	t.Parallel()
	peer := peertest.Start(t)
	log := &redistest.SyncBuffer{}
	x := startPeerRelay(t, peer.URL, ProtocolAuto, log)
	if x.r.Name() != "tasks-v2-demo" {
		t.Fatalf("name %q, want the server's (from server/discover)", x.r.Name())
	}
	if n := toolNames(x); !n["greet"] || !n["slow_compute"] || !n["confirm_delete"] || !n["failing_job"] {
		t.Fatalf("tools %v: want the task-required ones too (upstream tasks)", n)
	}
	if !strings.Contains(log.String(), `"protocol":"2026-07-28"`) {
		t.Fatalf("the session did not speak 2026-07-28:\n%s", log.String())
	}

	res, err := x.call(t, context.Background(), &fakeCall{}, "greet", `{"name":"Ada"}`)
	if err != nil || textOf(t, res) != "Hello, Ada!" || strings.Contains(string(res), "resultType") {
		t.Fatalf("greet (a plain call): %s %v", res, err)
	}
	slow := &fakeCall{}
	res, err = x.call(t, context.Background(), slow, "slow_compute", `{"seconds":1,"label":"gw"}`)
	if err != nil || !strings.Contains(textOf(t, res), `Computation "gw" completed`) {
		t.Fatalf("slow_compute (an upstream task): %s %v", res, err)
	}
	if !slices.Contains(slow.progress, "upstream task working") {
		t.Fatalf("progress %v: want the upstream task's status", slow.progress)
	}
	if !strings.Contains(log.String(), "polling it") {
		t.Fatalf("slow_compute ran without an upstream task:\n%s", log.String())
	}

	// The task's inputRequests come to the call as input requests; the
	// answer goes back with tasks/update.
	f := &fakeCall{answer: func(r consumer.InputRequest) (json.RawMessage, error) {
		if r.Method != "elicitation/create" || !strings.Contains(string(mustJSON(r.Params)), "important.txt") {
			t.Errorf("input request %s %s", r.Method, r.Params)
		}
		return json.RawMessage(`{"action":"accept","content":{"confirm":true}}`), nil
	}}
	res, err = x.call(t, context.Background(), f, "confirm_delete", `{}`)
	if err != nil || !strings.Contains(strings.ToLower(textOf(t, res)), "deleted") {
		t.Fatalf("confirm_delete: %s %v (asked %v)", res, err, f.asked)
	}

	// Two input requests at once (each answered with its own tasks/update),
	// and an MRTR round before the server makes the call a task.
	ada := func() *fakeCall {
		return &fakeCall{answer: func(consumer.InputRequest) (json.RawMessage, error) {
			return json.RawMessage(`{"action":"accept","content":{"confirm":true,"name":"Ada Lovelace"}}`), nil
		}}
	}
	f = ada()
	if res, err = x.call(t, context.Background(), f, "multi_input", `{}`); err != nil || textOf(t, res) != `name="Ada Lovelace" confirmed=true` || len(f.asked) != 2 {
		t.Fatalf("multi_input: %s %v (asked %d)", res, err, len(f.asked))
	}
	f = ada()
	if res, err = x.call(t, context.Background(), f, "test_tool_with_task", `{}`); err != nil || textOf(t, res) != "Hello, Ada Lovelace! (computed in task)" || len(f.asked) != 1 {
		t.Fatalf("test_tool_with_task (MRTR, then a task): %s %v (asked %d)", res, err, len(f.asked))
	}

	// A JSON-RPC error of the task is the call's; a tool error is a result.
	if _, err = x.call(t, context.Background(), &fakeCall{}, "protocol_error_job", `{}`); err == nil || !strings.Contains(err.Error(), "simulated protocol error") {
		t.Fatalf("protocol_error_job: %v", err)
	}
	if res, err = x.call(t, context.Background(), &fakeCall{}, "failing_job", `{}`); err != nil || !strings.Contains(string(res), `"isError":true`) {
		t.Fatalf("failing_job: %s %v", res, err)
	}
}

func TestModernCancelReachesTheUpstreamTask(t *testing.T) {
	t.Parallel()
	peer := peertest.Start(t)
	log := &redistest.SyncBuffer{}
	x := startPeerRelay(t, peer.URL, ProtocolModern, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := x.call(t, ctx, &fakeCall{}, "slow_compute", `{"seconds":60}`); done <- err }()
	var taskID string
	re := regexp.MustCompile(`"upstream_task":"([^"]+)".*"message":"the server runs the call as a task`)
	testenv.Eventually(t, 20*time.Second, "the upstream task", func() bool {
		if m := re.FindStringSubmatch(log.String()); m != nil {
			taskID = m[1]
		}
		return taskID != ""
	})
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled call succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled call still runs")
	}
	testenv.Eventually(t, 20*time.Second, "the upstream task cancelled", func() bool {
		st, err := peer.Status(taskID)
		return err == nil && st == "cancelled"
	})
}

func TestLegacyEraAgainstTheReference(t *testing.T) {
	t.Parallel()
	peer := peertest.Start(t)
	log := &redistest.SyncBuffer{}
	x := startPeerRelay(t, peer.URL, ProtocolLegacy, log)
	if !strings.Contains(log.String(), `"protocol":"2025-11-25"`) || strings.Contains(log.String(), "server/discover") {
		t.Fatalf("the session did not speak 2025-11-25:\n%s", log.String())
	}
	if n := toolNames(x); !n["greet"] || n["confirm_delete"] {
		t.Fatalf("tools %v: want greet, and no task-required tool (no upstream tasks in 2025-11-25 from this server)", n)
	}
	res, err := x.call(t, context.Background(), &fakeCall{}, "greet", `{"name":"Ada"}`)
	if err != nil || textOf(t, res) != "Hello, Ada!" {
		t.Fatalf("greet over initialize: %s %v", res, err)
	}
}
