package embednats

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/backend/natsbackend"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
)

// connectNATS connects a process as o says, closing it when the test ends.
func connectNATS(t *testing.T, o *natsbackend.Options) (*backend.Backend, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b, err := natsbackend.Connect(ctx, t.Name(), o)
	if err == nil {
		t.Cleanup(func() { _ = b.Close() })
	}
	return b, err
}

// startEmbedded starts the embedded NATS as the all-in-one api does, with
// its store and key in dir, and stops it when the test ends.
func startEmbedded(t *testing.T, dir string, auth natsbackend.Auth) *natsbackend.Options {
	t.Helper()
	o := &natsbackend.Options{DataDir: dir, Auth: auth, Storage: "memory", Prefix: strings.ToLower(natstest.Name(t))}
	ns, err := Start(o, "127.0.0.1:-1", "", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return o
}

// serverInfo reads the INFO line a NATS server sends a raw TCP client.
func serverInfo(t *testing.T, natsURL string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(natsURL, "nats://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("no INFO line from %s: %q %v", natsURL, line, err)
	}
	return line
}

// The embedded NATS requires authentication with a key it generates in the
// data dir (mode 0600) and reuses on the next start; a client without it is
// refused; a process given no credentials but the data dir joins.
func TestEmbeddedNATSGeneratesKey(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	o := startEmbedded(t, dir, natsbackend.Auth{})
	key := filepath.Join(dir, natsbackend.EmbeddedNKeyFile)
	if o.Auth.NKey != key {
		t.Fatalf("the api's own connection authenticates with %q, want %q", o.Auth.NKey, key)
	}
	fi, err := os.Stat(key)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key %s has mode %s, want 0600", key, fi.Mode().Perm())
	}
	seed, _ := os.ReadFile(key)
	if !strings.HasPrefix(string(seed), "SU") {
		t.Errorf("key %s holds %.2q…, want a user nkey seed (SU…)", key, seed)
	}
	if info := serverInfo(t, o.URL); !strings.Contains(info, `"auth_required":true`) {
		t.Errorf("INFO does not require auth: %s", info)
	}
	if nc, err := nats.Connect(o.URL, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("a client without credentials: %v, want an authorization violation", err)
	}

	// The api itself, and a worker or api tasks on this machine that know
	// only the URL and the data dir.
	if _, err := connectNATS(t, o); err != nil {
		t.Fatalf("the api's own connection: %v", err)
	}
	joiner := &natsbackend.Options{URL: o.URL, DataDir: dir, Storage: "memory", Prefix: o.Prefix}
	if _, err := connectNATS(t, joiner); err != nil {
		t.Fatalf("a process with the data dir: %v", err)
	}
	lost := &natsbackend.Options{URL: o.URL, DataDir: t.TempDir(), Storage: "memory", Prefix: o.Prefix}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = natsbackend.Connect(ctx, t.Name(), lost)
	wantRefused(t, time.Since(start), err, "Authorization Violation", "--nats-nkey <data-dir>/nats.nk")

	// A second start of the same data dir reuses the key.
	again := startEmbedded(t, t.TempDir(), natsbackend.Auth{NKey: key})
	if b, _ := os.ReadFile(key); string(b) != string(seed) {
		t.Fatal("the key changed on the second start")
	}
	if _, err := connectNATS(t, &natsbackend.Options{URL: again.URL, DataDir: dir, Storage: "memory", Prefix: o.Prefix}); err != nil {
		t.Fatalf("the same key on a server started with --nats-nkey: %v", err)
	}
}

// Credentials named explicitly are the embedded server's: a user and
// password, a token, or an nkey seed file (generated when missing).
func TestEmbeddedNATSExplicitCredentials(t *testing.T) {
	t.Parallel()
	seed := filepath.Join(t.TempDir(), "remote.nk")
	for _, auth := range []natsbackend.Auth{{User: "app", Password: "s3cret"}, {Token: "t0ken"}, {NKey: seed}} {
		dir := t.TempDir()
		o := startEmbedded(t, dir, auth)
		if _, err := os.Stat(filepath.Join(dir, natsbackend.EmbeddedNKeyFile)); err == nil {
			t.Errorf("%s: a data dir key was generated besides the named credentials", method(&auth))
		}
		if _, err := connectNATS(t, &natsbackend.Options{URL: o.URL, Auth: auth, Storage: "memory", Prefix: o.Prefix}); err != nil {
			t.Errorf("%s: %v", method(&auth), err)
		}
		if nc, err := nats.Connect(o.URL, nats.NoReconnect()); err == nil {
			nc.Close()
			t.Errorf("%s: a client without credentials connected", method(&auth))
		}
	}
	if fi, err := os.Stat(seed); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("--nats-nkey %s was not generated with mode 0600: %v", seed, err)
	}
}

// A listen address off loopback needs credentials named explicitly; other
// settings the embedded server cannot honour are refused by flag.
func TestEmbeddedNATSRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		listen string
		auth   natsbackend.Auth
		want   string
	}{
		{"0.0.0.0:-1", natsbackend.Auth{}, "refusing to open the embedded NATS to the network on --nats-listen 0.0.0.0:-1"},
		{"192.0.2.1:4250", natsbackend.Auth{}, "--nats-nkey FILE"},
		{"127.0.0.1:-1", natsbackend.Auth{Creds: "x.creds"}, "--nats-creds needs a NATS server in operator mode"},
		{"127.0.0.1:-1", natsbackend.Auth{User: "app"}, "--nats-user needs --nats-password"},
		{"127.0.0.1:-1", natsbackend.Auth{TLSCA: "ca.pem"}, "the embedded NATS serves no TLS"},
	} {
		dir := t.TempDir()
		o := &natsbackend.Options{DataDir: dir, Auth: c.auth}
		ns, err := Start(o, c.listen, "", zerolog.Nop())
		if ns != nil {
			ns.Shutdown()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want %q", c.listen, c.auth, err, c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, natsbackend.EmbeddedNKeyFile)); err == nil {
			t.Errorf("%s %+v: a key was generated though the start was refused", c.listen, c.auth)
		}
	}
	// With credentials named, the network address is served.
	o := &natsbackend.Options{DataDir: t.TempDir(), Auth: natsbackend.Auth{Token: "t0ken"}}
	ns, err := Start(o, "0.0.0.0:-1", "", zerolog.Nop())
	if err != nil {
		t.Fatalf("0.0.0.0 with --nats-token: %v", err)
	}
	ns.Shutdown()
}

// --nats-sync reaches the embedded server's JetStream; a bad value is
// refused before the server starts.
func TestEmbeddedNATSSync(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sync     string
		interval time.Duration // what the server runs with
		always   bool
		bad      bool
	}{
		{"", 2 * time.Minute, false, false}, {"always", 2 * time.Minute, true, false}, {"ALWAYS", 2 * time.Minute, true, false},
		{"5s", 5 * time.Second, false, false}, {"0s", 0, false, true}, {"-1s", 0, false, true}, {"sometimes", 0, false, true},
	} {
		o := &natsbackend.Options{DataDir: t.TempDir()}
		ns, err := Start(o, "127.0.0.1:-1", c.sync, zerolog.Nop())
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), "--nats-sync") {
				t.Errorf("--nats-sync %q: %v; want it refused", c.sync, err)
			}
			if ns != nil {
				ns.Shutdown()
			}
			continue
		}
		if err != nil {
			t.Fatalf("--nats-sync %q: %v", c.sync, err)
		}
		js := ns.JetStreamConfig()
		ns.Shutdown()
		ns.WaitForShutdown()
		if js == nil || js.SyncAlways != c.always || js.SyncInterval != c.interval {
			t.Errorf("--nats-sync %q: JetStream config %+v", c.sync, js)
		}
	}
}

// wantRefused fails unless err is a quick refusal naming why and flag.
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
