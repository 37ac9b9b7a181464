package redisbackend

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/internal/testpki"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// connectRedisWith connects o (its prefix fresh), enqueues a job on the
// backend's queue and closes it again.
func connectRedisWith(t *testing.T, o *Options) error {
	t.Helper()
	o.Prefix = redistest.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := Connect(ctx, t.Name(), o)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.Queue.Enqueue(ctx, &broker.Job{TaskID: taskstate.NewID(), Tool: "t"})
}

// A Redis with ACL users only: the user and password from the URL or the
// flags get in; a wrong password is refused with a hint.
func TestRedisACL(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, "--user", "default", "off", "--user", "app", "on", ">s3cret", "~*", "&*", "+@all")
	for _, o := range []*Options{
		{URL: "redis://app:s3cret@" + s.Addr + "/0"},
		{URL: "redis://" + s.Addr + "/0", User: "app", Password: "s3cret"},
		{URL: "redis://app:wrong@" + s.Addr + "/0", Password: "s3cret"}, // the flag wins
	} {
		if err := connectRedisWith(t, o); err != nil {
			t.Errorf("%s %+v: %v", o.URL, o, err)
		}
	}
	for _, o := range []*Options{
		{URL: "redis://app:guess@" + s.Addr + "/0"},
		{URL: "redis://" + s.Addr + "/0"},
	} {
		err := connectRedisWith(t, o)
		if err == nil || !strings.Contains(err.Error(), "check --redis-user and --redis-password") {
			t.Errorf("%s: error %v, want a refusal naming the flags", o.URL, err)
		}
	}
}

// A Redis that speaks TLS only and verifies clients: rediss:// with the CA
// and a client certificate gets in; without the certificate it is refused;
// TLS flags on a redis:// URL are refused before connecting.
func TestRedisTLS(t *testing.T) {
	t.Parallel()
	ca := testpki.NewCA(t, "redis")
	cert, key := ca.Server(t, "redis-server")
	ccert, ckey := ca.Client(t, "app")
	s := redistest.StartTLS(t, cert, key, ca.CertFile)
	url := "rediss://" + s.Addr + "/0"
	if err := connectRedisWith(t, &Options{URL: url, TLSCA: ca.CertFile, TLSCert: ccert, TLSKey: ckey}); err != nil {
		t.Fatalf("CA and client certificate: %v", err)
	}
	for _, c := range []struct {
		o    *Options
		want string
	}{
		{&Options{URL: url, TLSCA: ca.CertFile}, "check --redis-tls-ca, --redis-tls-cert"},
		{&Options{URL: url, TLSCert: ccert, TLSKey: ckey}, "x509: "},
		{&Options{URL: "redis://" + s.Addr + "/0", TLSCA: ca.CertFile}, "--redis-tls-* need a rediss://"},
	} {
		if err := connectRedisWith(t, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: error %v, want %q", c.o.URL, c.o, err, c.want)
		}
	}
}

// --redis-wait-replicas: with the replica frozen (SIGSTOP) the enqueue is
// refused after the timeout instead of acknowledging a task only the
// primary has; thawed, it is acknowledged again.
func TestRedisWaitReplicas(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", fmt.Sprint(primary.Port))
	testenv.Eventually(t, 10*time.Second, "the replica to sync", func() bool { return strings.Contains(replica.Output(), "MASTER <-> REPLICA sync: Finished") })
	// A live replica gets a bound a loaded machine cannot miss; the frozen
	// one the short bound whose expiry is the point.
	o := &Options{URL: primary.URL(), WaitReplicas: 1, WaitTimeout: 10 * time.Second}
	if err := connectRedisWith(t, o); err != nil {
		t.Fatalf("with a live replica: %v", err)
	}
	o.WaitTimeout = 300 * time.Millisecond
	if err := replica.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := connectRedisWith(t, o)
	_ = replica.Cmd.Process.Signal(syscall.SIGCONT)
	if err == nil || !strings.Contains(err.Error(), "--redis-wait-replicas 1: only 0 replicas had task") {
		t.Fatalf("with the replica stopped: %v, want the enqueue refused", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("refused after %s, before the timeout", took)
	}
	o.WaitReplicas = 0
	if err := func() error {
		_ = replica.Cmd.Process.Signal(syscall.SIGSTOP)
		defer func() { _ = replica.Cmd.Process.Signal(syscall.SIGCONT) }()
		return connectRedisWith(t, o)
	}(); err != nil {
		t.Fatalf("without waiting, the stopped replica must not matter: %v", err)
	}
	o.WaitReplicas, o.WaitTimeout = 1, 10*time.Second
	if err := connectRedisWith(t, o); err != nil {
		t.Fatalf("with the replica back: %v", err)
	}
}

// The settings of --redis and the Redis flags, read without connecting.
func TestRedisTarget(t *testing.T) {
	for _, c := range []struct {
		url  string
		conn Options
		want string // the target, or the error
	}{
		{"redis://127.0.0.1:6379/0", Options{}, "127.0.0.1:6379"},
		{"redis+sentinel://u:p%40ss@h1:26379,h2:26379/mymaster/2", Options{}, `primary "mymaster" via Sentinel h1:26379,h2:26379 user u pass p@ss db 2`},
		{"rediss+sentinel://[::1]:26379,h2:26379/m", Options{SentinelPassword: "sp"}, `primary "m" via Sentinel [::1]:26379,h2:26379 user  pass  db 0 tls sentinel-pass sp`},
		{"redis://:pw@ignored:1/3", Options{Sentinels: []string{"s1:26379", "s2:26379"}, Master: "mm"}, `primary "mm" via Sentinel s1:26379,s2:26379 user  pass pw db 3`},
		{"redis:///0", Options{Sentinels: []string{"s1:26379", "s2:26379"}, Master: "mymaster", User: "app", Password: "s3"}, `primary "mymaster" via Sentinel s1:26379,s2:26379 user app pass s3 db 0`},
		{"redis://127.0.0.1:6379/0", Options{Master: "mm"}, "--redis-master \"mm\" needs --redis-sentinels"},
		{"redis://127.0.0.1:6379/0", Options{Sentinels: []string{"s1:26379"}}, "--redis-sentinels needs --redis-master"},
		{"redis+sentinel://s1:26379/m", Options{Sentinels: []string{"s1:26379"}}, "give them once"},
		{"redis+sentinel://s1:26379", Options{}, "the path must be /master or /master/db"},
		{"redis+sentinel://s1:26379/m/x", Options{}, `database "x" is not a number`},
		{"redis+sentinel://s1:26379/m?db=1", Options{}, "no query or fragment"},
		{"redis+sentinel://u:secret@/m", Options{}, "no Sentinel address"},
		{"redis://u:secret@h:1/x", Options{}, `"redis://u:****@h:1/x"`},
	} {
		o := c.conn
		o.URL = c.url
		tg, err := o.target()
		got := ""
		switch {
		case err != nil:
			got = err.Error()
		case tg.failover != nil:
			f := tg.failover
			got = fmt.Sprintf("%s user %s pass %s db %d", tg, f.Username, f.Password, f.DB)
			if f.TLSConfig != nil {
				got += " tls"
			}
			if f.SentinelPassword != "" {
				got += " sentinel-pass " + f.SentinelPassword
			}
		default:
			got = tg.String()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s %+v: %s, want %s", c.url, c.conn.Sentinels, got, c.want)
		}
		if strings.Contains(got, "secret") {
			t.Errorf("%s: the error shows the password: %s", c.url, got)
		}
	}
}
