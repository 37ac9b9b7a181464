package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/internal/testpki"
)

// securePKI is a CA named name and, signed by it, the server's certificate
// (name-server) and a client's (mcpq), as files.
type securePKI struct {
	*testpki.CA
	cert, key, clientCert, clientKey string
}

func newSecurePKI(t *testing.T, name string) securePKI {
	t.Helper()
	p := securePKI{CA: testpki.NewCA(t, name)}
	p.cert, p.key = p.CA.Server(t, name+"-server")
	p.clientCert, p.clientKey = p.CA.Client(t, "mcpq")
	return p
}

// wantSecureTask fails the test unless a render_report task created through
// mcpURL completes.
func wantSecureTask(t *testing.T, mcpURL string) {
	t.Helper()
	c := harness.NewClient(mcpURL, true)
	id := c.StartTask(t, "render_report", map[string]any{"title": "secure", "pages": 1})
	if tk := c.WaitStatus(t, id, 20*time.Second, "completed", "failed", "cancelled"); tk.Status != "completed" {
		t.Fatalf("task ended %s: %+v", tk.Status, tk)
	}
}

// A nats-server as production runs it: operator mode (accounts and users
// as JWTs, users authenticating with credentials files) and TLS that
// verifies clients' certificates. api and worker connect with a tls:// URL,
// the CA, a client certificate and credentials, and a task completes; a
// worker with credentials the operator never signed, or without a client
// certificate, refuses to start and says why.
func TestSecureNATS(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	pki := newSecurePKI(t, "nats")
	op := natstest.NewOperator(t)

	port := harness.FreePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, `listen: "127.0.0.1:%d"
jetstream { store_dir: %q }
tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }
%s`, port, filepath.Join(dir, "js"), pki.cert, pki.key, pki.CertFile, op.Config()), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := harness.Start(t, "nats-server", b.NATSServer, nil, "-c", conf)
	ns.WaitOutput(t, "Server is ready", 20*time.Second)

	url := fmt.Sprintf("tls://127.0.0.1:%d", port)
	tlsArgs := []string{"--nats-tls-ca", pki.CertFile, "--nats-tls-cert", pki.clientCert, "--nats-tls-key", pki.clientKey}
	be := harness.Backend{Name: "nats", Args: append([]string{"--nats", url, "--nats-creds", op.Creds(t, "api")}, tlsArgs...)}
	prefix := "itsecure"
	mcpURL, _ := harness.API(t, b, be, prefix)
	// The worker takes its settings from the environment, as in a container.
	wenv := []string{"NATS_URL=" + url, "MCPQ_NATS_CREDS=" + op.Creds(t, "worker"),
		"MCPQ_NATS_TLS_CA=" + pki.CertFile, "MCPQ_NATS_TLS_CERT=" + pki.clientCert, "MCPQ_NATS_TLS_KEY=" + pki.clientKey}
	w := harness.Start(t, "worker", b.Worker, wenv, "--prefix", prefix, "--log-json")
	w.WaitOutput(t, "worker running", 20*time.Second)

	wantSecureTask(t, mcpURL)

	for _, bad := range []struct {
		name string
		args []string
		want []string
	}{
		{"foreign credentials", append([]string{"--nats-creds", op.ForeignCreds(t, "intruder")}, tlsArgs...),
			[]string{"refused the connection", "Authorization Violation", "--nats-creds"}},
		{"no client certificate", []string{"--nats-creds", op.Creds(t, "nocert"), "--nats-tls-ca", pki.CertFile},
			[]string{"refused the connection", "tls", "--nats-tls-cert"}},
	} {
		start := time.Now()
		out, code := runBinary(t, b.Worker, nil, append([]string{"--nats", url, "--prefix", prefix}, bad.args...)...)
		if code == 0 {
			t.Fatalf("%s: the worker ran:\n%s", bad.name, out)
		}
		for _, s := range bad.want {
			if !strings.Contains(out, s) {
				t.Errorf("%s: exit status %d, output lacks %q:\n%s", bad.name, code, s, out)
			}
		}
		t.Logf("%s: refused after %s", bad.name, time.Since(start).Round(time.Millisecond))
	}
}

// A Redis that speaks TLS only, verifies clients and knows ACL users only:
// api and worker get URL, user, password, CA and client certificate from
// the environment, a task completes, and asynqmon (in the api) reads the
// queues through the same kind of connection; a wrong password refuses to
// start, naming the flags to check.
func TestSecureRedis(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	pki := newSecurePKI(t, "redis")
	rs := redistest.StartTLS(t, pki.cert, pki.key, pki.CertFile, "--user", "default", "off", "--user", "app", "on", ">s3cret", "~*", "&*", "+@all")

	env := []string{"MCPQ_BROKER=asynq", "REDIS_URL=rediss://" + rs.Addr + "/0", "MCPQ_REDIS_USER=app", "MCPQ_REDIS_PASSWORD=s3cret",
		"MCPQ_REDIS_TLS_CA=" + pki.CertFile, "MCPQ_REDIS_TLS_CERT=" + pki.clientCert, "MCPQ_REDIS_TLS_KEY=" + pki.clientKey}
	be := harness.Backend{Name: "asynq"}
	prefix := "itsecureredis"
	mcpURL, _ := harness.APILogged(t, b, be, prefix, "api", "", env, "--asynqmon")
	harness.WorkerEnv(t, harness.LogDir(t), b.Worker, "worker", env, be, prefix)

	wantSecureTask(t, mcpURL)
	if body := get(t, strings.TrimSuffix(mcpURL, "/mcp")+"/asynqmon/api/queues"); !strings.Contains(body, prefix+".pool.default") {
		t.Errorf("asynqmon lists no queue of ours: %.300s", body)
	}

	bad := append(append([]string{}, env...), "MCPQ_REDIS_PASSWORD=guess")
	out, code := runBinary(t, b.Worker, bad, "--prefix", prefix)
	if code == 0 || !strings.Contains(out, "WRONGPASS") || !strings.Contains(out, "check --redis-user and --redis-password") {
		t.Errorf("wrong password: exit status %d, output:\n%s", code, out)
	}
}
