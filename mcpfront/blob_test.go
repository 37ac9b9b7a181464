package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/memstate"
)

// A plain result blob spliced into each reply gives the JSON value the
// in-memory path (reshape, detailedTask) gives for the same result, as a
// JSON reply and as an SSE event; a blob that is not plain is not spliced.
func TestSplicedRepliesMatchInMemory(t *testing.T) {
	ctx := context.Background()
	store := memstate.New(nil)
	s := New(nil, backend.Backend{Store: store}, &Config{Name: "srv", Version: "1", StateKey: []byte("k")})
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	id := json.RawMessage(`7`)
	meta := s.appendResultMeta(nil)
	related := relatedTaskMeta("t1")
	for _, result := range []string{
		`{}`,
		`{"content":[{"type":"text","text":"a\u00e9\n` + strings.Repeat("x", 200<<10) + `"}],"isError":false}`,
		"{\"content\":[]\n}", // a line break between tokens: one SSE data line all the same
	} {
		tk := &taskstate.Task{ID: taskstate.NewID(), Status: taskstate.Completed, CreatedAt: now, LastUpdatedAt: now, TTLMs: 60000}
		key := taskstate.BlobKey(tk.ID, "result")
		n, err := store.PutBlob(ctx, key, strings.NewReader(result), 0)
		if err != nil {
			t.Fatal(err)
		}
		tk.ResultRef = &taskstate.BlobRef{Key: key, Size: n, Plain: true}
		whole := tk.Clone()
		whole.Result, whole.ResultRef = json.RawMessage(result), nil

		for _, c := range []struct {
			name string
			rt   string
			meta json.RawMessage
		}{{"inline", resultComplete, meta}, {"tasks/result", "", related}, {"legacy inline", "", nil}} {
			want := reshape(whole.Result, c.rt, c.meta)
			for _, sse := range []bool{false, true} {
				rec := httptest.NewRecorder()
				out := &replier{w: rec, id: id}
				if sse {
					out.stream = &sseWriter{w: rec}
				}
				if !s.replySpliced(ctx, out, tk, c.rt, c.meta) {
					t.Fatalf("%s: a plain blob was not spliced", c.name)
				}
				sameResult(t, c.name, rec.Body.Bytes(), sse, want)
			}
		}

		rec := httptest.NewRecorder()
		if !s.tasksGetStreamed(ctx, rec, &call{req: &request{Message: mcpwire.Message{ID: id}}}, tk) {
			t.Fatal("tasks/get: a plain blob was not spliced")
		}
		sameResult(t, "tasks/get", rec.Body.Bytes(), false, s.detailedTask(whole))

		rec = httptest.NewRecorder()
		sub := json.RawMessage(`"sub-1"`)
		s.notifyTask(ctx, &sseWriter{w: rec}, tk, sub)
		got, want := sseData(t, rec.Body.Bytes()), s.taskNotification(whole, sub)
		if !sameJSON(got, want) {
			t.Errorf("notifications/tasks: %.300s, want %.300s", got, want)
		}
	}

	// Not plain: left to the in-memory path.
	tk := &taskstate.Task{ID: taskstate.NewID(), Status: taskstate.Completed, CreatedAt: now, LastUpdatedAt: now}
	key := taskstate.BlobKey(tk.ID, "result")
	n, _ := store.PutBlob(ctx, key, strings.NewReader(`{"_meta":{"a":1}}`), 0)
	tk.ResultRef = &taskstate.BlobRef{Key: key, Size: n}
	if s.replySpliced(ctx, &replier{w: httptest.NewRecorder(), id: id}, tk, "", nil) {
		t.Fatal("a blob that is not plain was spliced")
	}
}

func sameResult(t *testing.T, name string, body []byte, sse bool, want json.RawMessage) {
	t.Helper()
	if sse {
		body = sseData(t, body)
	}
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.JSONRPC != "2.0" || string(env.ID) != "7" {
		t.Fatalf("%s (sse %v): not a JSON-RPC reply: %.300s (%v)", name, sse, body, err)
	}
	if !sameJSON(env.Result, want) {
		t.Errorf("%s (sse %v): result %.300s, want %.300s", name, sse, env.Result, want)
	}
}

// sseData is the data of the one event in body.
func sseData(t *testing.T, body []byte) []byte {
	t.Helper()
	rest, ok := bytes.CutPrefix(body, []byte("event: message\ndata: "))
	data, end, ok2 := bytes.Cut(rest, []byte("\n\n"))
	if !ok || !ok2 || len(end) != 0 || bytes.ContainsAny(data, "\r\n") {
		t.Fatalf("not one SSE event of one data line: %.300q", body)
	}
	return data
}

func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// The memory of results read whole is bounded: a read that finds no room
// waits, then gets errResultsBusy, whose answer is retryable.
func TestResultMemoryBound(t *testing.T) {
	ctx := context.Background()
	store := memstate.New(nil)
	s := New(nil, backend.Backend{Store: store}, &Config{StateKey: []byte("k"), ResultMemory: 1000})
	put := func(size int) *taskstate.Task {
		tk := &taskstate.Task{ID: taskstate.NewID(), Status: taskstate.Completed}
		key := taskstate.BlobKey(tk.ID, "result")
		body := `{"_meta":{},"x":"` + strings.Repeat("y", size-19) + `"}`
		n, err := store.PutBlob(ctx, key, strings.NewReader(body), 0)
		if err != nil {
			t.Fatal(err)
		}
		tk.ResultRef = &taskstate.BlobRef{Key: key, Size: n}
		return tk
	}
	big, small := put(5000), put(600)
	r, release, err := s.resolved(ctx, big) // larger than the bound: it reads alone
	if err != nil || len(r.Result) != 5000 {
		t.Fatalf("a result larger than the bound: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := s.resolved(wctx, small); err == nil {
		t.Fatal("a second read while the bound is taken went ahead")
	}
	release()
	r2, release2, err := s.resolved(ctx, small)
	if err != nil || len(r2.Result) != 600 {
		t.Fatalf("after the release: %v", err)
	}
	release2()
	if e := resultMissing(errResultsBusy); e.Code != -32029 || !strings.Contains(e.Message, "ask again") {
		t.Fatalf("the busy answer: %+v", e)
	}
}
