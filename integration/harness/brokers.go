package harness

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
)

// LogDir is where StartLogged writes process logs: $MCPQ_FAULTS_LOGS (kept
// after the test, for reading a failed run at leisure) or a temp dir of t.
func LogDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("MCPQ_FAULTS_LOGS"); d != "" {
		dir := filepath.Join(d, strings.NewReplacer("/", "_").Replace(t.Name()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// StartLogged is Start with the output also appended to <logDir>/<name>.log
// (a restarted process appends to the same file). On failure the file's path
// is logged besides the output's tail.
func StartLogged(t testing.TB, logDir, name, bin string, env []string, args ...string) *Proc {
	t.Helper()
	path := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "==== %s started %s: %s %s\n", name, time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	p := start(t, "", name, bin, env, f, args)
	go func() { <-p.Done(); f.Close() }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log: %s", name, path)
		}
	})
	return p
}

// WorkerEnv is Worker with a log file in logDir and extra environment.
func WorkerEnv(t testing.TB, logDir, bin, name string, env []string, be Backend, prefix string, extra ...string) *Proc {
	t.Helper()
	args := append(append([]string{}, be.Args...), "--prefix", prefix, "--log-json")
	p := StartLogged(t, logDir, name, bin, env, append(args, extra...)...)
	Eventually(t, 30*time.Second, func() (bool, string) {
		if p.Exited() {
			t.Fatalf("%s exited before it ran:\n%s", name, p.Output())
		}
		return strings.Contains(p.Output(), "worker running"), name + " never logged \"worker running\""
	})
	return p
}

// NATSNode is a nats-server process with JetStream on file storage in a
// directory of its own. It can be killed (kill -9) and started again on the
// same ports and directory, as one node of a cluster or alone.
type NATSNode struct {
	Name                           string
	Port, MonitorPort, ClusterPort int // ClusterPort 0: not clustered
	Dir                            string
	Proc                           *Proc // the current incarnation

	bin, logDir string
	routes      []string
	t           testing.TB
}

// URL is the node's client URL.
func (n *NATSNode) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.Port) }

func (n *NATSNode) args() []string {
	a := []string{"-n", n.Name, "-a", "127.0.0.1", "-p", fmt.Sprint(n.Port), "-m", fmt.Sprint(n.MonitorPort),
		"-js", "-sd", n.Dir}
	if n.ClusterPort != 0 {
		a = append(a, "--cluster_name", "mcpq-faults",
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", n.ClusterPort),
			"--routes", strings.Join(n.routes, ","))
	}
	return a
}

// launch starts an incarnation without waiting for it.
func (n *NATSNode) launch() {
	n.Proc = StartLogged(n.t, n.logDir, n.Name, n.bin, nil, n.args()...)
}

// Kill is kill -9 of the current incarnation; it waits until the process is gone.
func (n *NATSNode) Kill() { n.Proc.Kill() }

// Restart starts the node again on the same ports and store directory and
// waits until its JetStream is healthy.
func (n *NATSNode) Restart(t testing.TB) {
	t.Helper()
	n.Kill()
	n.launch()
	n.WaitHealthy(t, 60*time.Second)
}

// WaitHealthy waits until the node's /healthz answers 200: JetStream is up,
// and in a cluster a meta leader is known and the node's streams are current.
func (n *NATSNode) WaitHealthy(t testing.TB, within time.Duration) {
	t.Helper()
	n.Proc.WaitHealthy(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", n.MonitorPort), within)
}

func newNATSNode(t testing.TB, b *Bins, logDir, name string, clustered bool) *NATSNode {
	n := &NATSNode{Name: name, Port: FreePort(t), MonitorPort: FreePort(t), Dir: filepath.Join(t.TempDir(), name),
		bin: b.NATSServer, logDir: logDir, t: t}
	if clustered {
		n.ClusterPort = FreePort(t)
	}
	return n
}

// NATSFileServer starts a lone nats-server with file storage that the test
// can kill and restart, and waits until it is healthy.
func NATSFileServer(t testing.TB, b *Bins, logDir string) *NATSNode {
	t.Helper()
	n := newNATSNode(t, b, logDir, "nats-server", false)
	n.launch()
	n.WaitHealthy(t, 60*time.Second)
	return n
}

// NATSCluster is nats-server processes routed to each other on loopback,
// each with JetStream and a store directory of its own.
type NATSCluster struct{ Nodes []*NATSNode }

// NewNATSCluster starts size nodes and waits until every one is healthy
// (routes up, a JetStream meta leader elected).
func NewNATSCluster(t testing.TB, b *Bins, logDir string, size int) *NATSCluster {
	t.Helper()
	c := &NATSCluster{}
	for i := range size {
		c.Nodes = append(c.Nodes, newNATSNode(t, b, logDir, fmt.Sprintf("nats-%d", i+1), true))
	}
	for _, n := range c.Nodes {
		for _, o := range c.Nodes {
			if o != n {
				n.routes = append(n.routes, fmt.Sprintf("nats://127.0.0.1:%d", o.ClusterPort))
			}
		}
		n.launch()
	}
	for _, n := range c.Nodes {
		n.WaitHealthy(t, 90*time.Second)
	}
	return c
}

// URLs is every node's client URL, comma-separated (what --nats accepts).
func (c *NATSCluster) URLs() string {
	var u []string
	for _, n := range c.Nodes {
		u = append(u, n.URL())
	}
	return strings.Join(u, ",")
}

// Node returns the node called name, or nil.
func (c *NATSCluster) Node(name string) *NATSNode {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// NATSBackend is the nats backend on url (one URL or a comma-separated list).
func NATSBackend(url string) Backend {
	return Backend{Name: "nats", Args: []string{"--nats", url}}
}

// RedisServer is a private redis-server process on a free port, that the
// test can kill and restart on the same port and directory.
type RedisServer struct {
	Name string
	Port int
	Dir  string
	Proc *Proc

	bin, logDir string
	pre, args   []string // before and after the common arguments
	ready       string   // the log line that says it serves ("": Ready to accept connections)
	t           testing.TB
}

// RedisServerBin is the redis-server the fault suite runs: $MCPQ_REDIS_SERVER
// or the one on PATH (redistest.Bin fails the test without one).
func RedisServerBin(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("MCPQ_REDIS_SERVER"); b != "" {
		return b
	}
	return redistest.Bin(t)
}

// StartRedis starts a private Redis with AOF on (appendfsync always) and
// waits until it accepts connections.
func StartRedis(t testing.TB, logDir string) *RedisServer {
	t.Helper()
	return StartRedisArgs(t, logDir, "redis-server", "--appendonly", "yes", "--appendfsync", "always", "--save", "")
}

// StartRedisArgs starts a private Redis called name (its log file's name)
// with args after the common ones, and waits until it accepts connections.
func StartRedisArgs(t testing.TB, logDir, name string, args ...string) *RedisServer {
	t.Helper()
	r := &RedisServer{Name: name, Port: FreePort(t), Dir: t.TempDir(), bin: RedisServerBin(t), logDir: logDir, args: args, t: t}
	r.launch(t)
	return r
}

// URL is the server's Redis URL.
func (r *RedisServer) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.Port) }

func (r *RedisServer) launch(t testing.TB) {
	t.Helper()
	args := append(append(append([]string{}, r.pre...), "--port", fmt.Sprint(r.Port), "--bind", "127.0.0.1", "--dir", r.Dir,
		"--protected-mode", "no", "--daemonize", "no", "--logfile", ""), r.args...)
	r.Proc = StartLogged(r.t, r.logDir, r.Name, r.bin, nil, args...)
	// Printed once the AOF is loaded and the port is open.
	ready := cmp.Or(r.ready, "Ready to accept connections")
	Eventually(t, 60*time.Second, func() (bool, string) {
		if r.Proc.Exited() {
			t.Fatalf("%s exited:\n%s", r.Name, tail(r.Proc.Output(), 4000))
		}
		return strings.Contains(r.Proc.Output(), ready), r.Name + " not ready"
	})
}

// Kill is kill -9; it waits until the process is gone.
func (r *RedisServer) Kill() { r.Proc.Kill() }

// Restart starts the server again on the same port and directory (it loads
// the append-only file) and waits until it accepts connections.
func (r *RedisServer) Restart(t testing.TB) {
	t.Helper()
	r.Kill()
	r.launch(t)
}

// Backend is the asynq backend on this server.
func (r *RedisServer) Backend() Backend {
	return Backend{Name: "asynq", Args: []string{"--broker", "asynq", "--redis", r.URL()}}
}
