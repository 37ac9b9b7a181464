package redistest

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The shared server answers, and it ends with the test binary that started
// it, however that binary ends: a child test binary starts one, reports its
// address and exits without any cleanup; the server must be gone soon after.
func TestSharedServerDiesWithTheBinary(t *testing.T) {
	if os.Getenv("REDISTEST_CHILD") == "1" {
		c := Client(t)
		if err := c.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("addr=" + Addr(t) + "\n")
		os.Exit(0) // no cleanup runs
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSharedServerDiesWithTheBinary$")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPQ_TEST_REDIS=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "REDISTEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, addr, ok := strings.Cut(string(out), "addr=")
	if !ok {
		t.Fatalf("child printed no address:\n%s", out)
	}
	addr = strings.TrimSpace(strings.SplitN(addr, "\n", 2)[0])
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return // gone
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the redis-server at %s outlived the test binary that started it by 5s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// MCPQ_TEST_REDIS may be host:port or a URL.
func TestAddrFromEnvironment(t *testing.T) {
	t.Setenv("MCPQ_TEST_REDIS", "redis://10.0.0.1:6390/2")
	if a, u := Addr(t), URL(t); a != "10.0.0.1:6390" || u != "redis://10.0.0.1:6390/2" {
		t.Errorf("URL form: Addr %s, URL %s", a, u)
	}
	t.Setenv("MCPQ_TEST_REDIS", "10.0.0.1:6390")
	if a, u := Addr(t), URL(t); a != "10.0.0.1:6390" || u != "redis://10.0.0.1:6390/0" {
		t.Errorf("host:port form: Addr %s, URL %s", a, u)
	}
}
