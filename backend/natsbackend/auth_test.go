package natsbackend

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/internal/testpki"
)

// connectWith runs Connect against srv with auth, within 20 s, and
// reports how long a failure took.
func connectWith(t *testing.T, srv *natstest.Server, auth Auth) (time.Duration, error) {
	t.Helper()
	o := natsOptions(t, srv, "memory")
	o.Auth = auth
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	b, err := Connect(ctx, t.Name(), o)
	if err == nil {
		_ = b.Close()
	}
	return time.Since(start), err
}

// wantRefused fails unless err is a prompt refusal (not the 20 s deadline)
// that says so and names the flags to check.
func wantRefused(t *testing.T, took time.Duration, err error, why, flag string) {
	t.Helper()
	if err == nil {
		t.Fatal("connected; want a refusal")
	}
	for _, s := range []string{"refused the connection", why, flag} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if took > 10*time.Second {
		t.Errorf("the refusal took %s: it waited instead of failing", took)
	}
}

// Each way to authenticate against a real server: the right secret
// connects (streams and buckets made), a wrong one is refused at once.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	pub, seed := natstest.NKeyUser(t)
	_, otherSeed := natstest.NKeyUser(t)
	for _, c := range []struct {
		name        string
		server      func(*server.Options)
		good, wrong Auth
	}{
		{"user", func(o *server.Options) { o.Users = []*server.User{{Username: "app", Password: "s3cret"}} },
			Auth{User: "app", Password: "s3cret"}, Auth{User: "app", Password: "guess"}},
		{"token", func(o *server.Options) { o.Authorization = "t0ken" },
			Auth{Token: "t0ken"}, Auth{Token: "other"}},
		{"nkey", func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} },
			Auth{NKey: seed}, Auth{NKey: otherSeed}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := natstest.StartWith(t, c.server)
			if _, err := connectWith(t, srv, c.good); err != nil {
				t.Fatalf("right credentials: %v", err)
			}
			took, err := connectWith(t, srv, c.wrong)
			wantRefused(t, took, err, "Authorization Violation", "--nats-")
			took, err = connectWith(t, srv, Auth{})
			wantRefused(t, took, err, "Authorization Violation", "--nats-")
		})
	}
}

// A server that verifies clients' certificates: the CA and a client
// certificate connect over tls://; no client certificate, or no CA (the
// system's roots do not know the test CA), is refused at once.
func TestNATSTLS(t *testing.T) {
	t.Parallel()
	ca := testpki.NewCA(t, "nats")
	cert, key := ca.Server(t, "nats-server")
	ccert, ckey := ca.Client(t, "worker")
	srv := natstest.StartWith(t, func(o *server.Options) {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cert, KeyFile: key, CaFile: ca.CertFile, Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		o.TLSConfig, o.TLS, o.TLSVerify = tc, true, true
	})
	if !strings.HasPrefix(srv.URL(), "tls://") {
		t.Fatalf("server URL %s, want tls://", srv.URL())
	}
	if _, err := connectWith(t, srv, Auth{TLSCA: ca.CertFile, TLSCert: ccert, TLSKey: ckey}); err != nil {
		t.Fatalf("CA and client certificate: %v", err)
	}
	took, err := connectWith(t, srv, Auth{TLSCA: ca.CertFile})
	wantRefused(t, took, err, "tls", "--nats-tls-cert")
	took, err = connectWith(t, srv, Auth{TLSCert: ccert, TLSKey: ckey})
	wantRefused(t, took, err, "x509: ", "--nats-tls-ca")
}

// Settings that cannot work are refused before connecting, naming the flag.
func TestAuthSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		auth Auth
		want string
	}{
		{Auth{Creds: junk, Token: "t"}, "--nats-creds and --nats-token exclude each other"},
		{Auth{User: "u", NKey: junk}, "--nats-nkey and --nats-user exclude each other"},
		{Auth{Password: "p"}, "--nats-password needs --nats-user"},
		{Auth{Creds: filepath.Join(dir, "missing.creds")}, "--nats-creds: open"},
		{Auth{Creds: junk}, "--nats-creds " + junk + " holds no user JWT"},
		{Auth{NKey: junk}, "--nats-nkey " + junk},
		{Auth{TLSCA: junk}, "--nats-tls-ca " + junk + " holds no PEM certificate"},
		{Auth{TLSCert: junk}, "--nats-tls-cert and --nats-tls-key go together"},
		{Auth{TLSCert: junk, TLSKey: junk}, "--nats-tls-cert " + junk},
	} {
		if _, err := c.auth.options(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.auth, err, c.want)
		}
	}
}
