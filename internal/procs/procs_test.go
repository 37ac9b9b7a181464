package procs

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
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
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
}

func TestFreePort(t *testing.T) {
	t.Parallel()
	if p, err := FreePort(); err != nil || p <= 0 {
		t.Fatalf("FreePort = %d, %v", p, err)
	}
}

// startSh runs sh -c script and returns once it printed its first line.
func startSh(t *testing.T, script string) *Proc {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := Start("/bin/sh", nil, w, false, "-c", script)
	w.Close()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(p.Kill)
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
		t.Fatalf("reading the first line: %v", err)
	}
	return p
}

func TestProcStop(t *testing.T) {
	t.Parallel()
	p := startSh(t, "echo up; exec sleep 30")
	if p.Exited() || p.Pid() <= 0 {
		t.Fatalf("fresh process: Exited %v, Pid %d", p.Exited(), p.Pid())
	}
	if !p.Stop(10 * time.Second) {
		t.Fatal("Stop: sleep did not end on SIGTERM")
	}
	if !p.Exited() || p.Err() == nil {
		t.Fatalf("after Stop: Exited %v, Err %v (want the signal)", p.Exited(), p.Err())
	}
}

func TestProcStopKillsAfterGrace(t *testing.T) {
	t.Parallel()
	p := startSh(t, `trap "" TERM; echo ready; while :; do sleep 1; done`)
	if p.Stop(50 * time.Millisecond) {
		t.Fatal("Stop reported an exit within grace of a process that ignores SIGTERM")
	}
	if !p.Exited() {
		t.Fatal("Stop returned before the killed process ended")
	}
}

func TestProcExitStatus(t *testing.T) {
	t.Parallel()
	p := startSh(t, "echo bye; exit 3")
	<-p.Done()
	var exit *exec.ExitError
	if !errors.As(p.Err(), &exit) || exit.ExitCode() != 3 {
		t.Fatalf("Err = %v, want exit status 3", p.Err())
	}
}
