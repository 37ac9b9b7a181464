package procs

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestLastSSEData(t *testing.T) {
	t.Parallel()
	body := []byte("event: message\ndata: {\"a\":1}\n\ndata: {\"b\":2}\n\n")
	if got := string(LastSSEData(body)); got != `{"b":2}` {
		t.Fatalf("LastSSEData = %q, want the last data line", got)
	}
	if got := LastSSEData([]byte("event: ping\n")); got != nil {
		t.Fatalf("LastSSEData without data = %q, want nil", got)
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "fine")
	}))
	defer srv.Close()
	resp, err := Get(context.Background(), srv.URL+"/ok")
	if err != nil {
		t.Fatalf("Get /ok: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(b) != "fine" {
		t.Fatalf("Get /ok body = %q", b)
	}
	if _, err := Get(context.Background(), srv.URL+"/down"); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("Get /down: err = %v, want the status and the body", err)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	t.Parallel()
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
}

func TestFreePort(t *testing.T) {
	t.Parallel()
	if p, err := FreePort(); err != nil || p <= 0 {
		t.Fatalf("FreePort = %d, %v", p, err)
	}
}
