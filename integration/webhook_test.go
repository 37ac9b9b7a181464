package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/webhook"
)

// hookSecret is the test's --webhook-secret, in the Standard Webhooks form.
var hookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("mcpqueue-webhook-test-key-24b"))

// hookReceiver is a webhook receiver: it records every request by path,
// answers as its path's script says, and checks signatures as a receiver
// would.
type hookReceiver struct {
	srv  *httptest.Server
	key  []byte
	mu   sync.Mutex
	got  map[string][]hookRequest
	fail map[string]int           // path: answer 500 to this many requests first
	hang map[string]chan struct{} // path: the first request is held until the client goes, and this closes when it arrives
}

type hookRequest struct {
	id, signature string
	body          []byte
	verifyErr     error
}

func newHookReceiver(t *testing.T) *hookReceiver {
	key, err := webhook.ParseSecret(hookSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookReceiver{key: key, got: map[string][]hookRequest{}, fail: map[string]int{}, hang: map[string]chan struct{}{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	_, verr := webhook.Verify(h.key, r.Header, body, time.Now(), 0)
	h.mu.Lock()
	n := len(h.got[r.URL.Path])
	arrived, hang := h.hang[r.URL.Path]
	if hang {
		delete(h.hang, r.URL.Path) // only the first request hangs
		close(arrived)
		h.mu.Unlock()
		<-r.Context().Done() // the sender died: this attempt is not received
		h.mu.Lock()
		h.got[r.URL.Path+"#lost"] = append(h.got[r.URL.Path+"#lost"], hookRequest{id: r.Header.Get(webhook.HeaderID)})
		h.mu.Unlock()
		return
	}
	h.got[r.URL.Path] = append(h.got[r.URL.Path], hookRequest{id: r.Header.Get(webhook.HeaderID), signature: r.Header.Get(webhook.HeaderSignature), body: body, verifyErr: verr})
	failing := n < h.fail[r.URL.Path]
	h.mu.Unlock()
	if failing {
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) requests(path string) []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.got[path]...)
}

// callWithMeta is tools/call with extra _meta entries.
func callWithMeta(ctx context.Context, c *harness.Client, tool string, args map[string]any, meta map[string]any) (*harness.Task, error) {
	req := c.Request(ctx, "tools/call", map[string]any{"name": tool, "arguments": args})
	var env map[string]any
	raw, _ := io.ReadAll(req.Body)
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, err
	}
	m := env["params"].(map[string]any)["_meta"].(map[string]any)
	for k, v := range meta {
		m[k] = v
	}
	raw, _ = json.Marshal(env)
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Result *harness.Task     `json:"result"`
		Error  *harness.RPCError `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if out.Error != nil {
		return nil, out.Error
	}
	return out.Result, nil
}

func hookMeta(url string) map[string]any {
	return map[string]any{"io.mcpqueue/webhook": map[string]any{"url": url}}
}

// Completion webhooks on both backends, through real api and worker
// processes: a webhook arrives once, signed (verified as a receiver does);
// a receiver answering 500 three times gets it on the fourth try, with the
// same webhook-id; a URL outside --webhook-allow (and any, with webhooks
// off) is -32602 with nothing stored or sent; and an api SIGKILLed after
// the task's terminal write, mid-delivery, leaves it to the restarted api.
func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		b := harness.Build(t)
		prefix := harness.Prefix("wh", t.Name())
		be := harness.NewBackend(t, b, broker, prefix)
		rcv := newHookReceiver(t)
		hookFlags := []string{"--webhook-allow", "127.0.0.1", "--webhook-secret", hookSecret,
			"--webhook-retry-base", "200ms", "--webhook-interval", "100ms"}
		url, api := harness.APIEnv(t, b, be, prefix, "api", nil, hookFlags...)
		harness.Worker(t, b.Worker, "worker", be, prefix)
		c := harness.NewClient(url, true)
		ctx := t.Context()

		// Arrives once, signed, with the outcome.
		task, err := callWithMeta(ctx, c, "wait", map[string]any{"ms": 20}, hookMeta(rcv.srv.URL+"/once"))
		if err != nil {
			t.Fatalf("tools/call with a webhook: %v", err)
		}
		// The flaky receiver: 500, 500, 500, then 204.
		rcv.mu.Lock()
		rcv.fail["/flaky"] = 3
		rcv.mu.Unlock()
		flaky, err := callWithMeta(ctx, c, "wait", map[string]any{"ms": 20}, hookMeta(rcv.srv.URL+"/flaky"))
		if err != nil {
			t.Fatalf("tools/call with a webhook: %v", err)
		}
		// A terminal status the api writes (tasks/cancel) is sent too.
		cancelled, err := callWithMeta(ctx, c, "wait", map[string]any{"ms": 60000}, hookMeta(rcv.srv.URL+"/cancelled"))
		if err != nil {
			t.Fatalf("tools/call with a webhook: %v", err)
		}
		if err := c.Call(ctx, "tasks/cancel", map[string]any{"taskId": cancelled.TaskID}, nil); err != nil {
			t.Fatalf("tasks/cancel: %v", err)
		}
		c.WaitStatus(t, task.TaskID, time.Minute, "completed")
		harness.Eventually(t, time.Minute, func() (bool, string) {
			return len(rcv.requests("/once")) > 0 && len(rcv.requests("/flaky")) >= 4 && len(rcv.requests("/cancelled")) > 0, "webhooks never arrived"
		})
		waitOutboxEmpty(t, url)
		once := rcv.requests("/once")
		if len(once) != 1 {
			t.Fatalf("the webhook arrived %d times, want once", len(once))
		}
		checkHook(t, once[0], task.TaskID, "completed")
		if got := rcv.requests("/cancelled"); len(got) != 1 {
			t.Fatalf("the cancelled task's webhook arrived %d times, want once", len(got))
		} else {
			checkHook(t, got[0], cancelled.TaskID, "cancelled")
		}
		tries := rcv.requests("/flaky")
		if len(tries) != 4 {
			t.Fatalf("the flaky receiver got %d attempts, want 4 (three 500s, then 204)", len(tries))
		}
		for _, r := range tries {
			checkHook(t, r, flaky.TaskID, "completed")
			if r.id != tries[0].id {
				t.Fatalf("retries carry webhook-id %q and %q: want one id per delivery", tries[0].id, r.id)
			}
		}

		// Outside the allow list: -32602 naming the host, nothing stored or sent.
		before := len(harness.Records(t, be, prefix))
		host := strings.Replace(rcv.srv.URL, "127.0.0.1", "localhost", 1)
		for u, want := range map[string]string{host + "/denied": "localhost", "http://10.0.0.1/denied": "10.0.0.1"} {
			_, err = callWithMeta(ctx, c, "wait", map[string]any{"ms": 1}, hookMeta(u))
			var rerr *harness.RPCError
			if !errors.As(err, &rerr) || rerr.Code != -32602 || !strings.Contains(rerr.Message, want) {
				t.Fatalf("webhook to %s: %v, want -32602 naming %s", u, err, want)
			}
		}
		// Webhooks off: -32602 saying so.
		offURL, _ := harness.APIEnv(t, b, be, prefix, "api-off", nil)
		_, err = callWithMeta(ctx, harness.NewClient(offURL, true), "wait", map[string]any{"ms": 1}, hookMeta(rcv.srv.URL+"/denied"))
		var rerr *harness.RPCError
		if !errors.As(err, &rerr) || rerr.Code != -32602 || !strings.Contains(rerr.Message, "webhooks are off") {
			t.Fatalf("webhook with webhooks off: %v, want -32602 webhooks are off", err)
		}
		if after := len(harness.Records(t, be, prefix)); after != before {
			t.Fatalf("refused calls stored %d task records", after-before)
		}
		if got := rcv.requests("/denied"); len(got) != 0 {
			t.Fatalf("a refused webhook was sent %d times", len(got))
		}

		// The api killed mid-delivery (after the terminal write): the
		// restarted api delivers it, with the same webhook-id.
		arrived := make(chan struct{})
		rcv.mu.Lock()
		rcv.hang["/kill"] = arrived
		rcv.mu.Unlock()
		killed, err := callWithMeta(ctx, c, "wait", map[string]any{"ms": 20}, hookMeta(rcv.srv.URL+"/kill"))
		if err != nil {
			t.Fatalf("tools/call with a webhook: %v", err)
		}
		select {
		case <-arrived:
		case <-time.After(time.Minute):
			t.Fatal("the first attempt never arrived")
		}
		api.Kill()
		if got := rcv.requests("/kill"); len(got) != 0 {
			t.Fatalf("delivered before the kill: %d", len(got))
		}
		url2, _ := harness.APIEnv(t, b, be, prefix, "api-restarted", nil, hookFlags...)
		harness.Eventually(t, time.Minute, func() (bool, string) {
			return len(rcv.requests("/kill")) > 0, "the restarted api never delivered the webhook"
		})
		waitOutboxEmpty(t, url2)
		got := rcv.requests("/kill")
		lost := rcv.requests("/kill#lost")
		if len(got) != 1 || len(lost) != 1 || got[0].id != lost[0].id {
			t.Fatalf("after the restart: %d delivered, %d lost attempts (ids %v, %v); want one of each with one id", len(got), len(lost), got, lost)
		}
		checkHook(t, got[0], killed.TaskID, "completed")
	})
}

// checkHook verifies one received webhook: its signature (as a receiver
// does), its webhook-id, and the task and status in its body.
func checkHook(t *testing.T, r hookRequest, taskID, status string) {
	t.Helper()
	if r.verifyErr != nil {
		t.Fatalf("webhook signature %q: %v", r.signature, r.verifyErr)
	}
	if r.id != webhook.DeliveryID(taskID) {
		t.Fatalf("webhook-id %q, want %q", r.id, webhook.DeliveryID(taskID))
	}
	var body struct {
		TaskID string          `json:"taskId"`
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.TaskID != taskID || body.Status != status || (status == "completed" && len(body.Result) == 0) {
		t.Fatalf("webhook body %s: want taskId %s, status %s and the result", r.body, taskID, status)
	}
}

// waitOutboxEmpty waits until the api at mcpURL reports no pending webhook
// (mcpq_webhook_pending 0 after a pass of the lease holder).
func waitOutboxEmpty(t *testing.T, mcpURL string) {
	t.Helper()
	metrics := strings.TrimSuffix(mcpURL, "/mcp") + "/metrics"
	harness.Eventually(t, time.Minute, func() (bool, string) {
		code, body := harness.Get(metrics)
		return code == 200 && strings.Contains(body, "\nmcpq_webhook_pending 0\n") && strings.Contains(body, `mcpq_webhook_deliveries_total{outcome="delivered"}`),
			fmt.Sprintf("the outbox never emptied (HTTP %d)", code)
	})
}
