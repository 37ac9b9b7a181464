package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// chromium finds Debian's chromium, or skips (fails with
// MCPQ_REQUIRE_BROWSER=1, as CI sets).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "headless Chromium not found: install Debian's chromium package (apt-get install chromium) to run the console browser test"
	if os.Getenv("MCPQ_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + " (MCPQ_REQUIRE_BROWSER=1)")
	}
	t.Skip(msg)
	return ""
}

// browser starts headless Chromium with a fresh profile and no network
// chatter of its own, and returns a tab's context.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(viewW, viewH),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	// The first call starts the browser, which lives as long as that
	// call's context: no deadline on this one.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// step runs browser actions with a deadline.
func step(t *testing.T, ctx context.Context, what string, within time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// value runs one browser action that answers a value, with a deadline.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// Colours of the console (console/static/style.css).
var (
	colWorking   = color.RGBA{0x25, 0x63, 0xeb, 0xff}
	colCompleted = color.RGBA{0x16, 0xa3, 0x4a, 0xff}
	colToolError = color.RGBA{0xb9, 0x1c, 0x1c, 0xff}
	colFailed    = color.RGBA{0xdc, 0x26, 0x26, 0xff} // failed badges, and the failure sparklines' bars
	colCancelled = color.RGBA{0x6b, 0x72, 0x80, 0xff}
	colSpark     = color.RGBA{0x08, 0x91, 0xb2, 0xff} // the ended-per-minute sparklines' bars
	colBar       = color.RGBA{0x1f, 0x29, 0x37, 0xff}
)

// The viewport of the console test: 1400 px wide, where the detail pane
// once covered the list's cancel buttons; and the height of its screenshot.
const viewW, viewH, shotH = 1400, 900, 1500

// TestConsoleBrowser drives the task console in headless Chromium against a
// real api (authentication on, one console admin) and worker on each broker:
// it signs in with the admin's token, watches a task go working → completed
// without a reload, sees a tool error marked as one, follows an input round,
// reads the queue view (counts, workers, broker depth, sparklines), checks at
// 1400 px that the detail pane leaves the cancel buttons clickable, cancels
// running tasks with the row's button, reads a task's timeline, and checks a
// screenshot of the page.
func TestConsoleBrowser(t *testing.T) {
	path := chromium(t)
	for _, broker := range brokers { // one after the other: one browser at a time
		t.Run(broker, func(t *testing.T) { consoleBrowser(t, path, broker) })
	}
}

// until polls a JavaScript expression in the page until it is true; at the
// deadline it fails with what explain (another expression) says.
func until(t *testing.T, ctx context.Context, what string, within time.Duration, expr, explain string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !value(t, ctx, what, chromedp.Evaluate[bool](expr)) {
		if time.Now().After(deadline) {
			t.Fatalf("browser: %s: not so after %s: %s", what, within, value(t, ctx, what, chromedp.Evaluate[string](explain)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// queueCell is the JavaScript text of an element of class cell in the queue
// view's row of tool.
func queueCell(tool, cell string) string {
	return fmt.Sprintf(`(document.querySelector('#queue tbody tr[data-tool=%q] .%s') || {}).textContent`, tool, cell)
}

// sparkSum is the JavaScript sum of a sparkline's per-minute values.
func sparkSum(tool, series string) string {
	return fmt.Sprintf(`((document.querySelector('#queue tbody tr[data-tool=%q] svg.spark[data-series=%q]') || {dataset: {values: ""}}).dataset.values || "").split(",").reduce((a, b) => a + Number(b), 0)`, tool, series)
}

func consoleBrowser(t *testing.T, path, broker string) {
	s := newAuthSystem(t, broker, jwtauth.RS256, "--console-admins", "ops-admin")
	worker := s.worker(t, "worker")
	base := strings.TrimSuffix(s.mcpURL, "/mcp")
	alice := s.client(t, "alice")
	adminToken := s.token(t, "ops-admin")

	// The console API answers the admin only; a user's token is refused.
	for tok, want := range map[string]int{"": 401, s.token(t, "alice"): 403, adminToken: 200} {
		for _, api := range []string{"tasks", "queue"} {
			req := must(http.NewRequestWithContext(t.Context(), "GET", base+"/console/api/"+api, nil))
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			if resp, body := do(t, req); resp.StatusCode != want {
				t.Fatalf("console API %s with token %.12q: %d %s, want %d", api, tok, resp.StatusCode, body, want)
			}
		}
	}

	ctx := browser(t, path)
	row := func(id string) string { return fmt.Sprintf(`#tasks tbody tr[data-id=%q]`, id) }

	// Sign in: the page asks for a token, keeps it in sessionStorage and goes live.
	step(t, ctx, "sign in", 60*time.Second,
		chromedp.EmulateViewport(viewW, viewH),
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`#login`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), adminToken),
		chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#conn.live`)),
	)
	stored := value(t, ctx, "read sessionStorage", chromedp.Evaluate[string](`sessionStorage.getItem("mcpq-console-token")`))
	// A mark that survives only as long as the page is not reloaded.
	value(t, ctx, "mark the page", chromedp.Evaluate[bool](`window.__noReload = true`))
	if stored != adminToken {
		t.Fatalf("sessionStorage holds %.20q, want the admin token", stored)
	}

	// A task changes state live: working, then completed, on the same page.
	quick := alice.StartTask(t, "wait", map[string]any{"ms": 3000})
	step(t, ctx, "row of the quick task turns working then completed", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(row(quick)+`[data-status="working"]`)),
		chromedp.WaitVisible(chromedp.CSS(row(quick)+`[data-status="completed"]`)),
	)

	// A tool error (completed, isError: true) is marked as an error, not
	// as a green completed.
	failing := alice.StartTask(t, "fail", map[string]any{"message": "the disk is full"})
	step(t, ctx, "row of the failing task shows a tool error", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(row(failing)+`[data-status="tool_error"] .badge.s-tool_error`)),
	)
	if b := value(t, ctx, "read the tool error's badge", chromedp.Text(chromedp.CSS(row(failing)+` .badge`))); b != "tool error" {
		t.Errorf("the tool error's badge reads %q, want \"tool error\"", b)
	}

	// An input round: asked, parked (nobody answers for a while), answered.
	ask := alice.StartTask(t, "confirm_action", map[string]any{"action": "rotate the keys"})
	step(t, ctx, "row of the asking task waits for input, parked", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(row(ask)+`[data-status="input_required"]`)),
	)
	var asked struct {
		InputRequests map[string]any `json:"inputRequests"`
	}
	harness.Eventually(t, 30*time.Second, func() (bool, string) {
		err := alice.Call(t.Context(), "tasks/get", map[string]any{"taskId": ask}, &asked)
		return err == nil && len(asked.InputRequests) == 1, fmt.Sprintf("input requests %v, %v", asked.InputRequests, err)
	})
	until(t, ctx, "the asking task is parked", 30*time.Second,
		`(document.querySelector('`+row(ask)+`') || {textContent: ""}).textContent.includes("waiting for input")`,
		`document.querySelector('`+row(ask)+`').textContent`)
	answers := map[string]any{}
	for k := range asked.InputRequests {
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	if err := alice.Call(t.Context(), "tasks/update", map[string]any{"taskId": ask, "inputResponses": answers}, nil); err != nil {
		t.Fatalf("tasks/update: %v", err)
	}
	step(t, ctx, "row of the asking task completes", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(row(ask)+`[data-status="completed"]`)),
	)

	// Two long tasks, picked up by the worker.
	long := alice.StartTask(t, "wait", map[string]any{"ms": 600000})
	long2 := alice.StartTask(t, "wait", map[string]any{"ms": 600000})
	step(t, ctx, "the long tasks run", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(row(long)+`[data-status="working"][data-attempt="1"] button.cancel`)),
		chromedp.WaitVisible(chromedp.CSS(row(long2)+`[data-status="working"][data-attempt="1"] button.cancel`)),
	)

	// The queue view: two running on the worker holding them, the broker's
	// two in flight (the admin sees every tenant), nothing queued.
	var rec struct {
		Task struct {
			Lease *struct{ Worker string } `json:"lease"`
		} `json:"task"`
	}
	req := must(http.NewRequestWithContext(t.Context(), "GET", base+"/console/api/tasks/"+long, nil))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if resp, body := do(t, req); resp.StatusCode != 200 || json.Unmarshal(body, &rec) != nil || rec.Task.Lease == nil {
		t.Fatalf("console detail of the long task: %d %s, want its lease", resp.StatusCode, body)
	}
	until(t, ctx, "the queue view shows the long tasks running", 30*time.Second,
		queueCell("wait", "running")+` === "2" && `+queueCell("wait", "queued")+` === "0" && `+
			queueCell("wait", "depth")+` === "0 / 2" && `+queueCell("wait", "workers")+` === `+strconv.Quote(rec.Task.Lease.Worker),
		`document.querySelector('#queue tbody').innerText`)

	// Cancel the first from its row; its detail pane shows its timeline.
	step(t, ctx, "cancel the running long task", 30*time.Second,
		chromedp.Click(chromedp.CSS(row(long)+` button.cancel`)),
		chromedp.WaitVisible(chromedp.CSS(row(long)+`[data-status="cancelled"]`)),
		chromedp.Click(chromedp.CSS(row(long)+` td.status`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#detail[data-id=%q][data-status="cancelled"] #timeline li[data-what="ended"]`, long))),
	)
	if got := alice.WaitStatus(t, long, 10*time.Second, "cancelled"); !strings.Contains(got.StatusMessage, "console by ops-admin") {
		t.Fatalf("tasks/get: %s %q, want cancelled from the console by ops-admin", got.Status, got.StatusMessage)
	}
	worker.WaitOutput(t, "handler observed cancellation", 20*time.Second)
	detail := value(t, ctx, "read the detail pane", chromedp.Text(chromedp.CSS(`#detail`)))
	for _, want := range []string{long, "created", "attempt 1 picked up by " + rec.Task.Lease.Worker, "cancelled — cancelled from the console by ops-admin"} {
		if !strings.Contains(detail, want) {
			t.Errorf("detail pane lacks %q:\n%s", want, detail)
		}
	}

	// At 1400 px, with the detail pane full and the list's widest message
	// shown, every cancel button is what a click at its centre hits.
	hits := value(t, ctx, "hit-test the cancel buttons", chromedp.Evaluate[string](`(() => {
		const out = [];
		for (const b of document.querySelectorAll("#tasks button.cancel")) {
			const r = b.getBoundingClientRect();
			const e = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
			if (e !== b) out.push("button at " + Math.round(r.x) + "," + Math.round(r.y) + " is covered by " + (e ? e.tagName + (e.closest("#detail") ? " in #detail" : "") : "nothing"));
		}
		return out.length ? out.join("; ") : (document.querySelectorAll("#tasks button.cancel").length + " clickable");
	})()`))
	if hits != "1 clickable" {
		t.Errorf("at %d px: %s; want the one cancel button left (the second long task's) clickable", viewW, hits)
	}
	step(t, ctx, "cancel the second long task", 30*time.Second,
		chromedp.Click(chromedp.CSS(row(long2)+` button.cancel`)),
		chromedp.WaitVisible(chromedp.CSS(row(long2)+`[data-status="cancelled"]`)),
	)

	// The input round's timeline: created, taken, asked, parked, answered,
	// taken again, completed — seen live, as the console was open.
	step(t, ctx, "open the asking task's timeline", 30*time.Second,
		chromedp.Click(chromedp.CSS(row(ask)+` td.status`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#detail[data-id=%q] #timeline li[data-what="ended"]`, ask))),
	)
	steps := value(t, ctx, "read the timeline", chromedp.Evaluate[string](`[...document.querySelectorAll("#timeline li")].map((li) => li.dataset.what + (li.classList.contains("seen") ? "" : "(record)")).join(" ")`))
	if want := "created(record) taken input parked answered resumed requeued taken ended"; steps != want {
		t.Errorf("timeline of the input round: %q, want %q", steps, want)
	}
	timeline := value(t, ctx, "read the timeline text", chromedp.Text(chromedp.CSS(`#timeline`)))
	for _, want := range []string{"attempt 1 picked up by " + rec.Task.Lease.Worker, "asked for input", "parked", "input answered", "attempt 2 picked up", "completed"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("timeline lacks %q:\n%s", want, timeline)
		}
	}

	// The queue view's last 15 minutes: three wait tasks ended (one
	// completed, two cancelled), none failed; the tool error counts as a
	// failure of fail; the sparklines draw them.
	until(t, ctx, "the queue view counts the ended tasks", 30*time.Second,
		sparkSum("wait", "ended")+` === 3 && `+sparkSum("wait", "failed")+` === 0 && `+queueCell("wait", "running")+` === "0" && `+
			sparkSum("fail", "ended")+` === 1 && `+sparkSum("fail", "failed")+` === 1 && `+queueCell("fail", "failure-rate")+` === "100% (1)" && `+
			sparkSum("confirm_action", "ended")+` === 1 && `+sparkSum("confirm_action", "failed")+` === 0`,
		`document.querySelector('#queue tbody').innerText + " " + [...document.querySelectorAll('#queue svg.spark')].map((s) => s.dataset.values).join(" | ")`)
	if bars := value(t, ctx, "count the sparklines' bars", chromedp.Evaluate[int](`[...document.querySelectorAll('#queue svg.spark rect')].filter((r) => Number(r.getAttribute("height")) > 0).length`)); bars < 4 {
		t.Errorf("%d sparkline bars drawn, want at least 4 (wait, fail, its failure, confirm_action)", bars)
	}

	still := value(t, ctx, "read the mark", chromedp.Evaluate[bool](`window.__noReload === true`))
	if !still {
		t.Fatal("the page was reloaded: the updates were not live")
	}
	if matched := value(t, ctx, "read the match count", chromedp.Text(chromedp.CSS(`#matched`))); matched != "5 matching" {
		t.Errorf("match count %q, want 5 matching", matched)
	}
	for tool, want := range map[string]string{"wait": "wait 1 2 3", "fail": "fail 1 1", "confirm_action": "confirm_action 1 1"} {
		counts := value(t, ctx, "read the counts", chromedp.Text(chromedp.CSS(fmt.Sprintf(`#counts tbody tr[data-tool=%q]`, tool))))
		if f := strings.Join(strings.Fields(counts), " "); f != want {
			t.Errorf("counts row for %s: %q, want %q", tool, f, want)
		}
	}
	if n := value(t, ctx, "count tool error cells", chromedp.Evaluate[int](`document.querySelectorAll('#counts tbody tr[data-tool="fail"] td[data-status="tool_error"] .badge').length`)); n != 1 {
		t.Errorf("the counts show the tool error in %d tool-error cells, want 1", n)
	}

	// The screenshot (docs/console.png) is of a taller window, so that it
	// shows the whole detail pane, the timeline included.
	step(t, ctx, "make the window taller", 10*time.Second, chromedp.EmulateViewport(viewW, shotH))
	shot := value(t, ctx, "screenshot", chromedp.CaptureScreenshot())
	dir := os.Getenv("MCPQ_CONSOLE_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	file := filepath.Join(dir, "console-"+broker+".png")
	if err := os.WriteFile(file, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", file)
	checkScreenshot(t, shot)
}

// checkScreenshot decodes the PNG and looks for what the page must show: the
// header bar across the top; badges in the completed, tool-error and
// cancelled colours (the counts, the rows, the detail pane); the sparklines'
// bars, a failure's among them; and no working badge left.
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != viewW || b.Dy() != shotH {
		t.Fatalf("screenshot is %dx%d, want the %dx%d viewport", b.Dx(), b.Dy(), viewW, shotH)
	}
	count := func(c color.RGBA, r image.Rectangle) int {
		n := 0
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				if color.RGBAModel.Convert(img.At(x, y)) == c {
					n++
				}
			}
		}
		return n
	}
	whole := img.Bounds()
	if n := count(colBar, image.Rect(0, 0, viewW, 30)); n < viewW*20 {
		t.Errorf("header bar: %d pixels of its colour in the top 30 rows, want most of them", n)
	}
	for _, c := range []struct {
		name string
		c    color.RGBA
		min  int
	}{
		// Badges: well over 500 pixels of fill each, two or three of each.
		{"completed badges", colCompleted, 1000},
		{"tool error badges", colToolError, 1000},
		{"cancelled badges", colCancelled, 1000},
		// Sparkline bars: 6 px wide, at least 2 px high.
		{"ended-per-minute bars", colSpark, 3 * 12},
		{"failure bars", colFailed, 12},
	} {
		if n := count(c.c, whole); n < c.min {
			t.Errorf("%s: %d pixels of %v, want at least %d", c.name, n, c.c, c.min)
		}
	}
	if n := count(colWorking, whole); n > 0 {
		t.Errorf("a working badge is still shown (%d pixels of %v)", n, colWorking)
	}
}
