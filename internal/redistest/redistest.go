// Package redistest connects tests to a real Redis server.
//
// Tests use one server per test binary: the one $MCPQ_TEST_REDIS names
// (host:port or a redis:// URL), or else a private redis-server that the
// first test to ask starts from PATH on a free loopback port, without
// persistence (--save "" --appendonly no), and that dies with the test
// binary (the kernel kills it when the process that started it ends: see
// startShared). A machine without a Redis service runs the tests as they
// are; one without redis-server gets an error naming the Debian package.
//
// Tests keep apart by naming every key, channel and queue with Name, which
// never repeats; nothing ever needs FLUSHALL. A test that needs to restart
// Redis, configure it or kill its connections starts a server of its own
// with Start.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/internal/procs"
)

// Bin is the redis-server on PATH; it fails t, naming the package to
// install, when there is none.
func Bin(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: the Redis tests need redis-server on PATH (Debian/Ubuntu: apt-get install redis-server), or MCPQ_TEST_REDIS naming a running server: %v", err)
	}
	return p
}

var shared struct {
	once sync.Once
	addr string
	err  error
}

// Addr is the host:port of the server tests share (see the package doc),
// started on first use.
func Addr(t testing.TB) string {
	t.Helper()
	if a := os.Getenv("MCPQ_TEST_REDIS"); a != "" {
		if strings.Contains(a, "://") {
			opt, err := redis.ParseURL(a)
			if err != nil {
				t.Fatalf("redistest: MCPQ_TEST_REDIS=%q: %v", a, err)
			}
			return opt.Addr
		}
		return a
	}
	bin := Bin(t)
	shared.once.Do(func() { shared.addr, shared.err = startShared(bin) })
	if shared.err != nil {
		t.Fatalf("redistest: %v", shared.err)
	}
	return shared.addr
}

// URL is Addr as a redis:// URL (database 0), or $MCPQ_TEST_REDIS when it
// is a URL.
func URL(t testing.TB) string {
	t.Helper()
	if a := os.Getenv("MCPQ_TEST_REDIS"); strings.Contains(a, "://") {
		return a
	}
	return "redis://" + Addr(t) + "/0"
}

// startShared starts the shared server. It is started from a goroutine
// locked to its OS thread for good, with Pdeathsig: the kernel kills the
// server when that thread ends, which is when the test binary exits, however
// it exits (a test's cleanup cannot do this: the server outlives every test).
func startShared(bin string) (string, error) {
	port, err := procs.FreePort()
	if err != nil {
		return "", err
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the server
		cmd := exec.Command(bin, serverArgs(port, os.TempDir())...)
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		procs.DieWithParent(cmd.SysProcAttr)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return "", fmt.Errorf("start %s: %w", bin, err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	return addr, waitPing(addr)
}

// serverArgs are the arguments of a private server without persistence.
func serverArgs(port int, dir string) []string {
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no", "--logfile", ""}
}

// Server is a private redis-server of one test.
type Server struct {
	Addr string // 127.0.0.1:port
	Port int
	Dir  string
	Cmd  *exec.Cmd
	out  *SyncBuffer
}

// URL is the server's redis:// URL, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Output is what the server logged so far.
func (s *Server) Output() string { return s.out.String() }

// Start runs a private redis-server on a free port in a temporary
// directory, without persistence unless args say otherwise (later
// arguments win), until the test ends, and waits until it is ready.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	port, err := procs.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return start(t, port, args)
}

// StartTLS is Start with TLS only: the port speaks TLS with the server
// certificate cert/key, and clients must present a certificate signed by
// the CA in caFile.
func StartTLS(t testing.TB, cert, key, caFile string, args ...string) *Server {
	t.Helper()
	port, err := procs.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return start(t, port, append([]string{"--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "yes"}, args...))
}

func start(t testing.TB, port int, args []string) *Server {
	t.Helper()
	bin := Bin(t)
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, Dir: t.TempDir(), out: &SyncBuffer{}}
	s.Cmd = exec.Command(bin, append(serverArgs(port, s.Dir), args...)...)
	s.Cmd.Stdout, s.Cmd.Stderr = s.out, s.out
	s.Cmd.SysProcAttr = &syscall.SysProcAttr{}
	procs.DieWithParent(s.Cmd.SysProcAttr)
	if err := s.Cmd.Start(); err != nil {
		t.Fatalf("redistest: start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = s.Cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = s.Cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.out.String(), "Ready to accept connections") {
		select {
		case <-exited:
			t.Fatalf("redistest: redis-server %v exited:\n%s", args, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: redis-server not ready after 10s:\n%s", s.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// SyncBuffer is a buffer safe for concurrent writers: a server's output,
// the log sink of an in-process component. The zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitPing polls addr with PING (a server that requires a password
// answers NOAUTH, which counts: it is up) until it answers or 10 s pass.
func waitPing(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil || strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "WRONGPASS") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server at %s not answering after 10s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client returns a client of the test server, closed in t.Cleanup. It fails
// the test if the server does not answer.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	c, _ := NamedClient(t)
	return c
}

// NamedClient is Client, also returning the fresh name its connections give
// the server (CLIENT SETNAME), by which KillSubscribers finds them.
func NamedClient(t testing.TB) (*redis.Client, string) {
	t.Helper()
	name := Name(t)
	addr := Addr(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ClientName: name})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		t.Fatalf("redistest: no Redis at %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, name
}

// Name returns a fresh name for t's keys, channels and queues: letters,
// digits and "_" only, so it is safe in any of them and in glob patterns.
func Name(t testing.TB) string {
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
	if len(base) > 40 {
		base = base[len(base)-40:]
	}
	return "t_" + base + "_" + rand.Text()[:10]
}

// DeleteKeys removes every key that starts with prefix (which must hold no
// glob characters) when the test ends.
func DeleteKeys(t testing.TB, c redis.UniversalClient, prefix string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			_ = c.Del(ctx, keys...).Err()
		}
	})
}

// KillSubscribers kills the connections in pub/sub mode whose client name is
// name (see redis.Options.ClientName), as a network failure would, and
// returns how many there were. Only a test's own connections carry its name,
// so no other test is disturbed.
func KillSubscribers(t testing.TB, admin redis.UniversalClient, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatalf("redistest: CLIENT LIST: %v", err)
	}
	killed := 0
	sc := bufio.NewScanner(strings.NewReader(list))
	for sc.Scan() {
		f := map[string]string{}
		for _, kv := range strings.Fields(sc.Text()) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["name"] == name && f["sub"] != "0" {
			if err := admin.Do(ctx, "CLIENT", "KILL", "ID", f["id"]).Err(); err != nil {
				t.Fatalf("redistest: CLIENT KILL: %v", err)
			}
			killed++
		}
	}
	return killed
}
