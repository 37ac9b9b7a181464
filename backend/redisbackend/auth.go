package redisbackend

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/internal/connutil"
)

// redisTarget is where the Redis clients go: one server, or a primary
// through Sentinel.
type redisTarget struct {
	plain       *redis.Options
	failover    *redis.FailoverOptions
	readTimeout time.Duration // at least this: a WAIT must not time out the read
}

func (t *redisTarget) client(name string) *redis.Client {
	if t.failover != nil {
		fo := *t.failover
		fo.ClientName = name
		fo.ReadTimeout = max(fo.ReadTimeout, t.readTimeout)
		return redis.NewFailoverClient(&fo)
	}
	o := *t.plain
	o.ClientName = name
	o.ReadTimeout = max(o.ReadTimeout, t.readTimeout)
	return redis.NewClient(&o)
}

// String names the target for logs and errors (no secrets).
func (t *redisTarget) String() string {
	if t.failover != nil {
		return fmt.Sprintf("primary %q via Sentinel %s", t.failover.MasterName, strings.Join(t.failover.SentinelAddrs, ","))
	}
	return t.plain.Addr
}

// target reads o.URL and the settings around it.
func (o *Options) target() (*redisTarget, error) {
	r := o
	raw := o.URL
	scheme, _, _ := strings.Cut(raw, "://")
	sentinelURL := scheme == "redis+sentinel" || scheme == "rediss+sentinel"
	useTLS := scheme == "rediss" || scheme == "rediss+sentinel"
	if r.Master != "" && len(r.Sentinels) == 0 && !sentinelURL {
		return nil, fmt.Errorf("redisbackend: --redis-master %q needs --redis-sentinels (or a redis+sentinel:// URL)", r.Master)
	}
	if len(r.Sentinels) > 0 && sentinelURL {
		return nil, fmt.Errorf("redisbackend: --redis-sentinels and a redis+sentinel:// --redis both name the Sentinels: give them once")
	}
	if (r.TLSCA != "" || r.TLSCert != "" || r.TLSKey != "") && !useTLS {
		return nil, fmt.Errorf("redisbackend: --redis-tls-* need a rediss:// (or rediss+sentinel://) --redis URL, got %s://", scheme)
	}
	tc, err := connutil.TLSConfig("redisbackend", "--redis-tls", r.TLSCA, r.TLSCert, r.TLSKey)
	if err != nil {
		return nil, err
	}
	var t redisTarget
	if r.WaitReplicas > 0 {
		t.readTimeout = r.WaitTimeout + 3*time.Second
	}
	switch {
	case sentinelURL:
		fo, err := parseSentinelURL(raw)
		if err != nil {
			return nil, err
		}
		t.failover = fo
	default:
		opt, err := redis.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("redisbackend: --redis %q: %w", redactURL(raw), err)
		}
		if len(r.Sentinels) > 0 {
			if r.Master == "" {
				return nil, fmt.Errorf("redisbackend: --redis-sentinels needs --redis-master (the Sentinel master name of the primary)")
			}
			t.failover = &redis.FailoverOptions{MasterName: r.Master, SentinelAddrs: r.Sentinels,
				Username: opt.Username, Password: opt.Password, DB: opt.DB, TLSConfig: opt.TLSConfig}
		} else {
			t.plain = opt
		}
	}
	if t.failover != nil {
		fo := t.failover
		if r.Master != "" {
			fo.MasterName = r.Master
		}
		fo.SentinelUsername, fo.SentinelPassword = r.SentinelUser, r.SentinelPassword
		if r.User != "" {
			fo.Username = r.User
		}
		if r.Password != "" {
			fo.Password = r.Password
		}
		if useTLS {
			fo.TLSConfig = mergeTLS(fo.TLSConfig, tc, "")
		}
		return &t, nil
	}
	if r.User != "" {
		t.plain.Username = r.User
	}
	if r.Password != "" {
		t.plain.Password = r.Password
	}
	if useTLS {
		host, _, _ := strings.Cut(t.plain.Addr, ":")
		t.plain.TLSConfig = mergeTLS(t.plain.TLSConfig, tc, host)
	}
	return &t, nil
}

// mergeTLS is the TLS configuration of a rediss:// URL with the flags' CA
// and client certificate.
func mergeTLS(base, flags *tls.Config, serverName string) *tls.Config {
	out := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if base != nil {
		out = base.Clone()
	}
	if flags != nil {
		out.RootCAs, out.Certificates = flags.RootCAs, flags.Certificates
	}
	return out
}

// parseSentinelURL reads redis+sentinel://[user:password@]host:port[,host:port…]/master[/db]
// (rediss+sentinel:// for TLS). The user and password are the primary's;
// the Sentinels' come from --redis-sentinel-user and --redis-sentinel-password.
func parseSentinelURL(raw string) (*redis.FailoverOptions, error) {
	bad := func(why string) error {
		return fmt.Errorf("redisbackend: --redis %q: %s (want redis+sentinel://[user:password@]host:port[,host:port…]/master[/db])", redactURL(raw), why)
	}
	_, rest, _ := strings.Cut(raw, "://")
	authority, path, _ := strings.Cut(rest, "/")
	fo := &redis.FailoverOptions{}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		u, err := url.Parse("redis://" + authority[:at+1] + "x")
		if err != nil || u.User == nil {
			return nil, bad("unreadable user:password@")
		}
		fo.Username = u.User.Username()
		fo.Password, _ = u.User.Password()
		authority = authority[at+1:]
	}
	fo.SentinelAddrs = connutil.SplitList(authority)
	if len(fo.SentinelAddrs) == 0 {
		return nil, bad("no Sentinel address")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, bad("no query or fragment is read")
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if parts[0] == "" || len(parts) > 2 {
		return nil, bad("the path must be /master or /master/db")
	}
	fo.MasterName = parts[0]
	if len(parts) == 2 {
		db, err := strconv.Atoi(parts[1])
		if err != nil || db < 0 {
			return nil, bad(fmt.Sprintf("database %q is not a number", parts[1]))
		}
		fo.DB = db
	}
	return fo, nil
}

// redactURL masks a URL's password, for error messages.
func redactURL(s string) string { return connutil.Redact(s) }

// redisHint says which flags to check for errors the settings cause.
func redisHint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "NOPERM"):
		return " (check --redis-user and --redis-password, or the user:password@ of --redis)"
	case strings.Contains(msg, "x509: "), strings.Contains(msg, "tls: "):
		return " (check --redis-tls-ca, --redis-tls-cert and --redis-tls-key and the rediss:// URL)"
	case strings.Contains(msg, "redis: all sentinels"), strings.Contains(msg, "master"):
		return " (check --redis-sentinels, --redis-master and the Sentinels' password)"
	}
	return ""
}
