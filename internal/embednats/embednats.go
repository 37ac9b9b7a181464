// Package embednats starts the all-in-one api's embedded NATS server. It is
// the only package of the binaries that imports nats-server, so a worker
// module (which needs backend and natsbackend, never this) does not build it.
package embednats

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend/natsbackend"
	"github.com/mcpqueue/mcpqueue/internal/loopback"
)

// Start starts the all-in-one api's NATS server: JetStream with
// file storage under o.DataDir, listening for clients on listen (host:port)
// so separate workers can join. sync is the JetStream sync policy
// (ParseSync: "", "always" or a duration).
//
// The server always requires authentication. It accepts the credentials
// o.Auth names: the user nkey of --nats-nkey (the seed file is
// generated, mode 0600, if missing), --nats-user with --nats-password, or
// --nats-token. With none it accepts the user nkey whose seed is
// <data-dir>/nats.nk, generated (mode 0600) on first start and reused after;
// processes on this machine find it there (see natsbackend.Options.DataDir). A listen
// address off loopback needs credentials named explicitly.
//
// On success o.URL is the server's client URL and o.NATSAuth holds the
// credentials, so o.Connect joins it.
func Start(o *natsbackend.Options, listen, sync string, log zerolog.Logger) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("embednats: --nats-listen %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("embednats: --nats-listen %q: bad port", listen)
	}
	interval, always, err := ParseSync(sync)
	if err != nil {
		return nil, err
	}
	a := &o.Auth
	explicit := a.NKey != "" || a.User != "" || a.Token != ""
	switch {
	case a.Creds != "":
		return nil, errors.New("embednats: --nats-creds needs a NATS server in operator mode; the embedded NATS takes --nats-nkey, --nats-user with --nats-password, or --nats-token")
	case a.TLSCA != "" || a.TLSCert != "" || a.TLSKey != "":
		return nil, errors.New("embednats: the embedded NATS serves no TLS: --nats-tls-* apply to an external NATS (--nats)")
	case !explicit && !loopback.Host(host):
		return nil, fmt.Errorf("embednats: refusing to open the embedded NATS to the network on --nats-listen %s with the key generated for this machine: name the credentials remote workers will use, --nats-nkey FILE (a user nkey seed, generated if missing), --nats-user with --nats-password, or --nats-token; or listen on 127.0.0.1", listen)
	}
	if o.DataDir == "" {
		return nil, errors.New("embednats: the embedded NATS needs a data dir (--data-dir)")
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embednats: data dir: %w", err)
	}
	opts := &server.Options{
		ServerName:   "mcpqueue-embedded",
		Host:         host,
		Port:         port,
		JetStream:    true,
		StoreDir:     filepath.Join(o.DataDir, "jetstream"),
		NoSigs:       true,
		SyncInterval: interval, // 0: the server's default
		SyncAlways:   always,
	}
	if !explicit {
		a.NKey = filepath.Join(o.DataDir, natsbackend.EmbeddedNKeyFile)
	}
	switch {
	case a.NKey != "":
		pub, err := userNKey(a.NKey, log)
		if err != nil {
			return nil, err
		}
		opts.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	case a.User != "":
		if a.Password == "" {
			return nil, errors.New("embednats: --nats-user needs --nats-password for the embedded NATS")
		}
		opts.Users = []*server.User{{Username: a.User, Password: a.Password}}
	default:
		opts.Authorization = a.Token
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embednats: embedded NATS: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embednats: embedded NATS did not start on %s", listen)
	}
	o.URL = ns.ClientURL()
	ev := log.Info()
	if !loopback.Host(host) {
		ev = log.Warn().Str("note", "NATS traffic to this address is not encrypted: keep it on a private network")
	}
	// NewServer filled in the default interval.
	ev.Str("url", o.URL).Str("store", opts.StoreDir).Str("sync", syncName(opts)).
		Str("guarantee", SyncPromise(opts.SyncInterval, opts.SyncAlways)).Str("auth", method(a)).
		Msg("embedded NATS running (JetStream, file storage)")
	return ns, nil
}

// method names how a authenticates, for logs.
func method(a *natsbackend.Auth) string {
	switch {
	case a.Creds != "":
		return "creds " + a.Creds
	case a.NKey != "":
		return "nkey " + a.NKey
	case a.User != "":
		return "user " + a.User
	case a.Token != "":
		return "token"
	}
	return "none"
}

// userNKey returns the public key of the user nkey seed in path, writing a
// new seed there (mode 0600) if there is no file.
func userNKey(path string, log zerolog.Logger) (string, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		raw, err = newSeedFile(path)
		if err == nil {
			log.Info().Str("file", path).Msg("generated the embedded NATS's user nkey seed: workers and api tasks on this machine read it with --data-dir, others take a copy with --nats-nkey")
		}
	}
	if err != nil {
		return "", fmt.Errorf("embednats: embedded NATS key %s: %w", path, err)
	}
	kp, err := nkeys.ParseDecoratedNKey(raw)
	if err != nil {
		return "", fmt.Errorf("embednats: embedded NATS key %s holds no nkey seed: %w", path, err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err == nil && !nkeys.IsValidPublicUserKey(pub) {
		err = errors.New("not a user key (its seed starts SU)")
	}
	if err != nil {
		return "", fmt.Errorf("embednats: embedded NATS key %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn().Str("file", path).Str("mode", fi.Mode().Perm().String()).Msg("the embedded NATS's key is readable by other users: chmod 600 it")
	}
	return pub, nil
}

// newSeedFile writes a new user nkey seed to path, readable by its owner
// only, and returns it.
func newSeedFile(path string) ([]byte, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(append(seed, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	return seed, nil
}

// syncName is the sync policy o runs with, for the startup log.
func syncName(o *server.Options) string {
	if o.SyncAlways {
		return "always"
	}
	return o.SyncInterval.String()
}

// ParseSync reads --nats-sync: "" keeps the server's default (a background
// fsync every 2 minutes), "always" fsyncs every write before it is
// acknowledged, and a duration sets the background fsync interval.
func ParseSync(s string) (interval time.Duration, always bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return 0, false, nil
	case "always":
		return 0, true, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, false, fmt.Errorf("embednats: --nats-sync %q: want a positive duration such as 1s, or always", s)
	}
	return d, false, nil
}

// SyncPromise says, for the startup log, what a sync policy keeps through a
// crash of the machine (a crash of the process alone loses nothing
// acknowledged: every write reaches the operating system first).
func SyncPromise(interval time.Duration, always bool) string {
	if always {
		return "every acknowledged write is on disk (fsync before ack): survives process, OS and power failures"
	}
	return fmt.Sprintf("survives a process crash; an OS crash or power loss may lose writes of the last %s (fsync interval; --nats-sync always to fsync each write)", interval)
}
