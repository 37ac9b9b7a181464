package integration

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
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
		chromedp.WindowSize(1280, 900),
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

// Status colours of the console's badges (console/static/style.css).
var (
	colWorking   = color.RGBA{0x25, 0x63, 0xeb, 0xff}
	colCompleted = color.RGBA{0x16, 0xa3, 0x4a, 0xff}
	colCancelled = color.RGBA{0x6b, 0x72, 0x80, 0xff}
	colBar       = color.RGBA{0x1f, 0x29, 0x37, 0xff}
)

// TestConsoleBrowser drives the task console in headless Chromium against a
// real api (authentication on, one console admin) and worker on each broker:
// it signs in with the admin's token, watches a task go working → completed
// without a reload, cancels a running task with the row's button, and checks
// the record, the worker and a screenshot of the page.
func TestConsoleBrowser(t *testing.T) {
	path := chromium(t)
	for _, broker := range brokers { // one after the other: one browser at a time
		t.Run(broker, func(t *testing.T) { consoleBrowser(t, path, broker) })
	}
}

func consoleBrowser(t *testing.T, path, broker string) {
	s := newAuthSystem(t, broker, jwtauth.RS256, "--console-admins", "ops-admin")
	worker := s.worker(t, "worker")
	base := strings.TrimSuffix(s.mcpURL, "/mcp")
	alice := s.client(t, "alice")
	adminToken := s.token(t, "ops-admin")

	// The console API answers the admin only; a user's token is refused.
	for tok, want := range map[string]int{"": 401, s.token(t, "alice"): 403, adminToken: 200} {
		req := must(http.NewRequestWithContext(t.Context(), "GET", base+"/console/api/tasks", nil))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		if resp, body := do(t, req); resp.StatusCode != want {
			t.Fatalf("console API with token %.12q: %d %s, want %d", tok, resp.StatusCode, body, want)
		}
	}

	ctx := browser(t, path)
	row := func(id string) string { return fmt.Sprintf(`#tasks tbody tr[data-id=%q]`, id) }

	// Sign in: the page asks for a token, keeps it in sessionStorage and goes live.
	step(t, ctx, "sign in", 60*time.Second,
		chromedp.EmulateViewport(1280, 900),
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

	// A long task, picked up by the worker, cancelled from its row.
	long := alice.StartTask(t, "wait", map[string]any{"ms": 600000})
	step(t, ctx, "cancel the running long task", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(row(long)+`[data-status="working"][data-attempt="1"] button.cancel`)),
		chromedp.Click(chromedp.CSS(row(long)+` button.cancel`)),
		chromedp.WaitVisible(chromedp.CSS(row(long)+`[data-status="cancelled"]`)),
		chromedp.Click(chromedp.CSS(row(long)+` td.status`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#detail[data-id=%q][data-status="cancelled"] #attempts li`, long))),
	)
	if got := alice.WaitStatus(t, long, 10*time.Second, "cancelled"); !strings.Contains(got.StatusMessage, "console by ops-admin") {
		t.Fatalf("tasks/get: %s %q, want cancelled from the console by ops-admin", got.Status, got.StatusMessage)
	}
	worker.WaitOutput(t, "handler observed cancellation", 20*time.Second)

	still := value(t, ctx, "read the mark", chromedp.Evaluate[bool](`window.__noReload === true`))
	counts := value(t, ctx, "read the counts", chromedp.Text(chromedp.CSS(`#counts tbody tr[data-tool="wait"]`)))
	detail := value(t, ctx, "read the detail pane", chromedp.Text(chromedp.CSS(`#detail`)))
	if matched := value(t, ctx, "read the match count", chromedp.Text(chromedp.CSS(`#matched`))); matched != "2 matching" {
		t.Errorf("match count %q, want 2 matching", matched)
	}
	if !still {
		t.Fatal("the page was reloaded: the updates were not live")
	}
	if f := strings.Fields(counts); strings.Join(f, " ") != "wait 1 1 2" {
		t.Errorf("counts row for wait: %q, want one completed, one cancelled, total 2", counts)
	}
	for _, want := range []string{long, "picked up", "attempt 1 picked up", "cancelled from the console by ops-admin"} {
		if !strings.Contains(detail, want) {
			t.Errorf("detail pane lacks %q:\n%s", want, detail)
		}
	}

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
// header bar across the top, and badges in the completed and cancelled
// colours (the table row, the counts and the detail pane), and no working
// badge left.
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 900 {
		t.Fatalf("screenshot is %dx%d, want the 1280x900 viewport", b.Dx(), b.Dy())
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
	if n := count(colBar, image.Rect(0, 0, 1280, 30)); n < 1280*20 {
		t.Errorf("header bar: %d pixels of its colour in the top 30 rows, want most of them", n)
	}
	for name, c := range map[string]color.RGBA{"completed": colCompleted, "cancelled": colCancelled} {
		// Three badges each (counts table, task row; the detail pane shows
		// the cancelled one too), every badge well over 500 pixels of fill.
		if n := count(c, whole); n < 1000 {
			t.Errorf("%s badges: %d pixels of %v, want at least 1000", name, n, c)
		}
	}
	if n := count(colWorking, whole); n > 0 {
		t.Errorf("a working badge is still shown (%d pixels of %v)", n, colWorking)
	}
}
