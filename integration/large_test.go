package integration

// Large payloads end to end: results and arguments of megabytes, and
// a 10 MB artifact returned as a resource_link.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// pattern is what the demo's blob tool returns: "0123456789…", n bytes.
func pattern(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0' + byte(i%10)
	}
	return string(b)
}

type content struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Data     string `json:"data"`
	MimeType string `json:"mimeType"`
	URI      string `json:"uri"` // of a resource_link
}

func contents(t *testing.T, raw json.RawMessage) []content {
	t.Helper()
	var r struct {
		Content []content `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("not a CallToolResult: %.200s (%v)", raw, err)
	}
	return r.Content
}

// TestLargeResults: results of 2 MB and 20 MB of text and a 5 MB image
// complete as tasks and come back from tasks/get byte for byte, each from
// one handler run; an inline call returns a 2 MB result too; a result past
// --max-result fails after one run, naming its size and the limit.
func TestLargeResults(t *testing.T) {
	t.Parallel()
	onBrokersWith(t, []string{"--handle-after", "15m"}, func(t *testing.T, s *system) {
		w := s.worker(t, "worker", "--max-result", "30000000")
		c := harness.NewClient(s.mcpURL, true)
		cases := []struct {
			kind  string
			bytes int
		}{{"text", 2_000_000}, {"text", 20_000_000}, {"image", 5_000_000}}
		ids := make([]string, len(cases))
		for i, tc := range cases {
			ids[i] = c.StartTask(t, "blob", map[string]any{"bytes": tc.bytes, "kind": tc.kind})
		}
		for i, tc := range cases {
			tk := c.WaitStatus(t, ids[i], 60*time.Second, "completed", "failed")
			if tk.Status != "completed" {
				t.Fatalf("blob %s %d: %s %+v", tc.kind, tc.bytes, tk.Status, tk.Error)
			}
			got := contents(t, tk.Result)
			want := pattern(tc.bytes)
			switch {
			case len(got) != 1:
				t.Fatalf("blob %s %d: %d content blocks", tc.kind, tc.bytes, len(got))
			case tc.kind == "text" && got[0].Text != want:
				t.Fatalf("blob text %d: %d bytes back, not the ones produced", tc.bytes, len(got[0].Text))
			case tc.kind == "image":
				data, err := base64.StdEncoding.DecodeString(got[0].Data)
				if err != nil || string(data) != want || got[0].MimeType != "image/png" {
					t.Fatalf("blob image %d: %d bytes back (%v), mime %q", tc.bytes, len(data), err, got[0].MimeType)
				}
			}
			if n := count(w, ids[i], "blob: producing the result"); n != 1 {
				t.Fatalf("blob %s %d: the handler ran %d times, want once", tc.kind, tc.bytes, n)
			}
		}

		inline := harness.NewClient(s.mcpURL, false)
		// What is measured is memory, not time: with -race binaries on a
		// loaded 2-core machine six 63 MiB results take minutes to make,
		// store and stream (over the client's default 3 min, seen, and the
		// api's --handle-after, whose 30 s default would hand the call over:
		// the api runs with 15m).
		inline.HTTP.Timeout = 15 * time.Minute
		res, err := inline.CallTool(context.Background(), "blob", map[string]any{"bytes": 2_000_000})
		if err != nil {
			t.Fatalf("inline blob: %v", err)
		}
		if got := contents(t, mustMarshal(res)); len(got) != 1 || got[0].Text != pattern(2_000_000) {
			t.Fatalf("inline blob: the 2 MB result did not come back whole")
		}

		over := c.StartTask(t, "blob", map[string]any{"bytes": 31_000_000})
		tk := c.WaitStatus(t, over, 60*time.Second, "failed", "completed")
		if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "over the limit of 30000000 bytes") ||
			!strings.Contains(tk.Error.Message, "is 310000") {
			t.Fatalf("a result past --max-result: %s %+v, want failed naming the size and the limit", tk.Status, tk.Error)
		}
		if n := count(w, over, "blob: producing the result"); n != 1 {
			t.Fatalf("the over-limit task ran %d times, want once", n)
		}
	})
}

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestLargeArguments: 8 MB of arguments reach the handler intact; past
// --max-args the call is refused before anything is queued.
func TestLargeArguments(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		s.worker(t, "worker")
		c := harness.NewClient(s.mcpURL, true)
		echo := pattern(8_000_000)
		id := c.StartTask(t, "blob", map[string]any{"bytes": 1, "echo": echo})
		tk := c.WaitStatus(t, id, 60*time.Second, "completed", "failed")
		if got := contents(t, tk.Result); tk.Status != "completed" || len(got) != 2 || got[1].Text != echo {
			t.Fatalf("8 MB of arguments: %s, the echo did not come back intact", tk.Status)
		}
		api := strings.TrimSuffix(s.mcpURL, "/mcp")
		before := scrape(t, api)[`mcpq_tasks_created_total{tool="blob"}`]
		_, err := c.CallTool(context.Background(), "blob", map[string]any{"bytes": 1, "echo": pattern(16<<20 + 1000)})
		var rpc *harness.RPCError
		if !errors.As(err, &rpc) || !strings.Contains(rpc.Message, "over the limit of 16777216 bytes (--max-args)") {
			t.Fatalf("arguments past the limit: %v, want a refusal naming the limit", err)
		}
		if after := scrape(t, api)[`mcpq_tasks_created_total{tool="blob"}`]; after != before {
			t.Fatalf("a refused call created a task: %v → %v", before, after)
		}
	})
}

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
					return id, ct.URI
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

// largeMiB is the result size TestLargeResultMemory reads: 63 MiB of text,
// under the worker's default --max-result of 64 MiB.
const largeMiB = 63

// apiPeakBound is what the api may reach (VmHWM, KiB) while it serves
// twelve 63 MiB replies at once. Read whole, each costed about 7× its size
// (one took the api from 33 to 490 MiB); streamed from the store, the api
// holds a chunk of each. The api is built without -race
// (harness.BuildPlain), so no shadow memory is counted.
const apiPeakBound = 200 << 10

// TestLargeResultMemory: six concurrent inline calls (a client without the
// tasks extension) and six concurrent 2025-11-25 tasks/result reads of one
// stored result, each of 63 MiB, all come back byte for byte while the
// api's peak resident set stays under apiPeakBound: the replies stream the
// result from the store instead of building it in memory. The binaries
// are built without -race: under it the twelve replies took 12 minutes a
// broker on a 2-core machine (and timed out in CI), and what is measured is
// the api's memory, which the detector's shadow memory would swell; the
// same paths run under -race in TestLargeResults.
func TestLargeResultMemory(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		s := newSystemOf(t, harness.BuildPlain(t), broker, "--handle-after", "5m")
		s.worker(t, "worker", "--max-result", "70000000", "--concurrency", "8")
		n := largeMiB << 20
		sum := sha256.Sum256([]byte(pattern(n)))
		want := hex.EncodeToString(sum[:])
		// One stored result, read six times at once through tasks/result.
		sess := initializeLegacy(t, s.mcpURL, "large")
		var created struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		}
		sess.call(s.mcpURL, "tools/call", map[string]any{"name": "blob", "arguments": map[string]any{"bytes": n}, "task": map[string]any{"ttl": 600000}}, &created)
		id := created.Task.TaskID
		harness.Eventually(t, 3*time.Minute, func() (bool, string) {
			var tk legacyTaskView
			sess.call(s.mcpURL, "tasks/get", map[string]any{"taskId": id}, &tk)
			return tk.Status == "completed", "task " + id + " " + tk.Status
		})
		var wg sync.WaitGroup
		errs := make(chan error, 12)
		check := func(what string, req *http.Request, timeout time.Duration) {
			n, sum, err := streamedText(req, timeout)
			switch {
			case err != nil:
				errs <- fmt.Errorf("%s: %w", what, err)
			case sum != want:
				errs <- fmt.Errorf("%s: %d bytes of text, not the ones produced", what, n)
			default:
				errs <- nil
			}
		}
		for i := range 6 {
			wg.Go(func() {
				check(fmt.Sprintf("tasks/result %d", i), legacyRequest("2025-11-25", s.mcpURL, sess.id, "tasks/result", map[string]any{"taskId": id}, i), 3*time.Minute)
			})
		}
		wg.Wait()

		// Six inline calls at once, each a 63 MiB result of its own: a
		// 2026-07-28 client without the tasks extension. On a loaded
		// 2-core machine six 63 MiB results take a while to make, store
		// and stream (the api's --handle-after, whose 30 s default would
		// hand the call over, is 5m here).
		inline := harness.NewClient(s.mcpURL, false)
		for i := range 6 {
			wg.Go(func() {
				check(fmt.Sprintf("inline call %d", i), inline.Request(context.Background(), "tools/call", map[string]any{"name": "blob", "arguments": map[string]any{"bytes": n}}), 5*time.Minute)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}

		hwm := vmKiB(t, s.api.Pid(), "VmHWM")
		t.Logf("%s: api VmHWM %.1f MiB after 6 tasks/result and 6 inline reads of %d MiB (bound %d MiB)", s.be.Name, float64(hwm)/1024, largeMiB, apiPeakBound>>10)
		if hwm > apiPeakBound {
			t.Errorf("the api peaked at %.1f MiB serving %d MiB results, over the bound of %d MiB", float64(hwm)/1024, largeMiB, apiPeakBound>>10)
		}
	})
}

// streamedText sends req and reads its reply as it arrives: the one text
// block's bytes go through SHA-256, the rest (a few hundred bytes) is kept
// and checked to be a result with one text block. It returns the text's
// length and hex digest. Read whole and decoded as JSON in the -race test
// binary, twelve 63 MiB replies took minutes of both cores, and the api,
// rightly, cut off the stalled readers after its --write-timeout.
func streamedText(req *http.Request, timeout time.Duration) (n int64, sum string, err error) {
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	open := []byte(`"text":"`)
	var head []byte
	for !bytes.Contains(head, open) {
		b, err := br.ReadSlice('"')
		head = append(head, b...)
		if err != nil {
			return 0, "", fmt.Errorf("HTTP %d: no text block in %.500q: %w", resp.StatusCode, head, err)
		}
		if len(head) > 64<<10 {
			return 0, "", fmt.Errorf("HTTP %d: no text block in the first 64 KiB: %.500q", resp.StatusCode, head)
		}
	}
	h := sha256.New()
	for {
		b, err := br.ReadSlice('"')
		if errors.Is(err, bufio.ErrBufferFull) {
			h.Write(b)
			n += int64(len(b))
			continue
		}
		if err != nil {
			return n, "", fmt.Errorf("reading the text after %d bytes: %w", n, err)
		}
		h.Write(b[:len(b)-1])
		n += int64(len(b) - 1)
		break
	}
	tail, err := io.ReadAll(io.LimitReader(br, 64<<10))
	if err != nil {
		return n, "", fmt.Errorf("reading after the text: %w", err)
	}
	rest := append(head, tail...)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(rest, []byte(`"result":`)) || bytes.Count(rest, []byte(`"type":"text"`)) != 1 || bytes.Count(tail, open) != 0 {
		return n, "", fmt.Errorf("HTTP %d: not a result with one text block: %.500q … %.500q", resp.StatusCode, head, tail)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// vmKiB reads a "VmHWM:"-style field of /proc/<pid>/status, in KiB.
func vmKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the api's memory: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s in /proc/%d/status: %q", field, pid, l)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
