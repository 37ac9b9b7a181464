package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/memstate"
	"github.com/mcpqueue/mcpqueue/webhook"
)

var testKey = []byte("0123456789abcdef0123")

// receiver counts requests and answers with the codes in order (then 204).
type receiver struct {
	mu    sync.Mutex
	n     int
	codes []int
	ids   []string
	body  []byte
	err   error
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	id, err := webhook.Verify(testKey, req.Header, b, time.Now(), 0)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.ids, r.body, r.err = append(r.ids, id), b, err
	code := http.StatusNoContent
	if len(r.codes) > 0 {
		code, r.codes = r.codes[0], r.codes[1:]
	}
	if code == http.StatusFound {
		w.Header().Set("Location", "/elsewhere")
	}
	w.WriteHeader(code)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// fakeClock is a clock a test moves forward.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// setup stores a terminal task with a delivery to url and returns a
// Deliverer over it.
func setup(t *testing.T, allow, url string, clock *fakeClock) (*webhook.Deliverer, *memstate.Store, string) {
	t.Helper()
	st := memstate.New(nil)
	now := clock.Now()
	task := &taskstate.Task{ID: taskstate.NewID(), Tool: "echo", Status: taskstate.Completed, CreatedAt: now, LastUpdatedAt: now,
		Result: json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`)}
	if err := st.Create(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	if err := st.AddDelivery(t.Context(), &taskstate.Delivery{TaskID: task.ID, URL: url, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	list, err := webhook.ParseAllowList(allow)
	if err != nil {
		t.Fatal(err)
	}
	d, err := webhook.New(st, &webhook.Config{Allow: list, Key: testKey, RetryBase: time.Second, RetryFor: 10 * time.Second, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return d, st, task.ID
}

func pending(t *testing.T, st *memstate.Store) []*taskstate.Delivery {
	t.Helper()
	var out []*taskstate.Delivery
	if err := st.Deliveries(t.Context(), func(d *taskstate.Delivery) bool { out = append(out, d); return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

// A failed attempt is retried after RetryBase, then twice as long, and a
// 2xx ends the delivery; every attempt is signed with the same id.
func TestDeliverRetriesWithBackoff(t *testing.T) {
	rcv := &receiver{codes: []int{500, 500, 500}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	clock := &fakeClock{now: time.Now()}
	d, st, id := setup(t, "127.0.0.1", srv.URL+"/hook", clock)
	ctx := t.Context()
	pass := func() webhook.PassStats {
		t.Helper()
		s, err := d.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for i, wait := range []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second} {
		clock.add(wait - time.Millisecond)
		if wait > 0 {
			if s := pass(); s.Attempted != 0 {
				t.Fatalf("attempt %d made before its backoff of %s ran out", i+1, wait)
			}
		}
		clock.add(time.Millisecond)
		if s := pass(); s.Attempted != 1 {
			t.Fatalf("attempt %d not made after %s: %+v", i+1, wait, s)
		}
	}
	if rcv.count() != 4 || len(pending(t, st)) != 0 {
		t.Fatalf("%d attempts, %d pending; want 4 and none", rcv.count(), len(pending(t, st)))
	}
	for _, got := range rcv.ids {
		if got != webhook.DeliveryID(id) {
			t.Fatalf("webhook-id %q, want %q on every attempt", got, webhook.DeliveryID(id))
		}
	}
	if rcv.err != nil || !strings.Contains(string(rcv.body), `"status":"completed"`) {
		t.Fatalf("last attempt: %v, body %s", rcv.err, rcv.body)
	}
}

// A delivery that keeps failing is given up RetryFor after its first
// attempt.
func TestDeliverGivesUp(t *testing.T) {
	rcv := &receiver{codes: []int{500, 500, 500, 500, 500, 500, 500}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	clock := &fakeClock{now: time.Now()}
	d, st, _ := setup(t, "127.0.0.1", srv.URL, clock)
	for range 6 {
		if _, err := d.Pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		clock.add(5 * time.Second)
	}
	if n := len(pending(t, st)); n != 0 {
		t.Fatalf("%d deliveries still pending after RetryFor", n)
	}
	if rcv.count() != 3 { // at 0s, 5s (after 1s), 10s (after 2s): given up at 10s
		t.Fatalf("%d attempts before giving up, want 3", rcv.count())
	}
}

// A redirect is not followed: it is a failed attempt.
func TestDeliverNoRedirect(t *testing.T) {
	other := &receiver{}
	mux := http.NewServeMux()
	rcv := &receiver{codes: []int{http.StatusFound}}
	mux.Handle("/hook", rcv)
	mux.Handle("/elsewhere", other)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	d, st, _ := setup(t, "127.0.0.1", srv.URL+"/hook", &fakeClock{now: time.Now()})
	if s, err := d.Pass(t.Context()); err != nil || s.Delivered != 0 {
		t.Fatalf("a redirect counted as delivered: %+v, %v", s, err)
	}
	if other.count() != 0 || len(pending(t, st)) != 1 || !strings.Contains(pending(t, st)[0].LastError, "302") {
		t.Fatalf("redirect followed (%d) or delivery not kept for a retry: %+v", other.count(), pending(t, st))
	}
}

// A host allowed by name that resolves to a private address (DNS
// rebinding, here localhost → 127.0.0.1) is not dialled: only listed
// networks and public addresses are.
func TestDeliverChecksDialledAddress(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	d, st, _ := setup(t, "localhost", url, &fakeClock{now: time.Now()})
	if _, err := d.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := pending(t, st)
	if rcv.count() != 0 || len(p) != 1 || !strings.Contains(p[0].LastError, "not in the webhook allow list") {
		t.Fatalf("localhost dialled on a name-only allow list: %d requests, pending %+v", rcv.count(), p)
	}
	// With the network listed, it is.
	d2, st2, _ := setup(t, "localhost,127.0.0.0/8", url, &fakeClock{now: time.Now()})
	if s, err := d2.Pass(context.Background()); err != nil || s.Delivered != 1 || len(pending(t, st2)) != 0 {
		t.Fatalf("delivery to a listed network: %+v, %v", s, err)
	}
}

func TestAllowList(t *testing.T) {
	a, err := webhook.ParseAllowList(" hooks.example.com, 10.1.0.0/16 ,127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for url, ok := range map[string]bool{
		"https://hooks.example.com/x":   true,
		"https://HOOKS.example.com./x":  true,
		"http://10.1.2.3:8080/":         true,
		"http://127.0.0.1:9/":           true,
		"http://127.0.0.2/":             false,
		"http://evil.example.com/":      false,
		"ftp://hooks.example.com/":      false,
		"https://u:p@hooks.example.com": false,
		"/relative":                     false,
		"http://[::1]/":                 false,
	} {
		if _, err := a.CheckURL(url); (err == nil) != ok {
			t.Errorf("CheckURL(%q) = %v, want allowed %v", url, err, ok)
		}
	}
	if _, err := a.CheckURL("http://evil.example.com/"); err == nil || !strings.Contains(err.Error(), `"evil.example.com"`) {
		t.Errorf("refusal does not name the host: %v", err)
	}
	if off, err := webhook.ParseAllowList(" , "); off != nil || err != nil {
		t.Errorf("empty list: %v, %v; want nil (off)", off, err)
	}
	if _, err := (*webhook.AllowList)(nil).CheckURL("http://127.0.0.1/"); !errors.Is(err, webhook.ErrOff) {
		t.Errorf("nil list: %v, want ErrOff", err)
	}
	if _, err := webhook.ParseAllowList("http://x/"); err == nil {
		t.Error("a URL in the allow list was accepted")
	}
}

func TestParseSecret(t *testing.T) {
	if k, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"); err != nil || len(k) != 24 {
		t.Fatalf("whsec_ form: %d bytes, %v", len(k), err)
	}
	if _, err := webhook.ParseSecret("short"); err == nil {
		t.Fatal("a 5-byte secret was accepted")
	}
	if _, err := webhook.ParseSecret("whsec_!!!"); err == nil {
		t.Fatal("whsec_ with bad base64 was accepted")
	}
}
