package backend

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/asynqbroker"
)

// RedisConn is how a process reaches Redis besides --redis
// (docs/security.md, "Connecting to a secured broker"): a primary found
// through Sentinel, an ACL user, TLS, and how many replicas must have a task
// before it is acknowledged.
type RedisConn struct {
	// Sentinels (host:port, comma-separated) and Master: find the primary
	// named Master through these Sentinels; --redis then gives only the
	// user, password, database and TLS (rediss://), not the address. A
	// redis+sentinel:// URL says the same in one value.
	Sentinels, Master string
	// User and Password authenticate to Redis (ACL), overriding the URL's.
	User, Password string
	// SentinelUser and SentinelPassword authenticate to the Sentinels.
	SentinelUser, SentinelPassword string
	// TLS client settings, for rediss:// URLs.
	TLSCA, TLSCert, TLSKey string
	// WaitReplicas > 0: a task is acknowledged (its job enqueued) only once
	// every write so far is on that many replicas (Redis WAIT), within
	// WaitTimeout; otherwise the enqueue fails and the caller gets an error.
	WaitReplicas int
	WaitTimeout  time.Duration
}

func (r *RedisConn) flags(e *Env) {
	e.String(&r.Sentinels, "redis-sentinels", "MCPQ_REDIS_SENTINELS", "", "asynq backend: Redis Sentinel addresses, host:port comma-separated; the primary named by --redis-master is found through them (--redis then gives user, password, database and rediss:// TLS, not the address)")
	e.String(&r.Master, "redis-master", "MCPQ_REDIS_MASTER", "", "asynq backend: the Sentinel master name of the primary (with --redis-sentinels)")
	e.String(&r.User, "redis-user", "MCPQ_REDIS_USER", "", "asynq backend: Redis ACL user (overrides the user of --redis)")
	e.String(&r.Password, "redis-password", "MCPQ_REDIS_PASSWORD", "", "asynq backend: Redis password (overrides the password of --redis)")
	e.String(&r.SentinelUser, "redis-sentinel-user", "MCPQ_REDIS_SENTINEL_USER", "", "asynq backend: ACL user for the Sentinels")
	e.String(&r.SentinelPassword, "redis-sentinel-password", "MCPQ_REDIS_SENTINEL_PASSWORD", "", "asynq backend: password of the Sentinels")
	e.String(&r.TLSCA, "redis-tls-ca", "MCPQ_REDIS_TLS_CA", "", "asynq backend: PEM file of the CA certificates that sign Redis's certificate (default: the system's); needs a rediss:// URL")
	e.String(&r.TLSCert, "redis-tls-cert", "MCPQ_REDIS_TLS_CERT", "", "asynq backend: client certificate (PEM) for a Redis with tls-auth-clients (with --redis-tls-key)")
	e.String(&r.TLSKey, "redis-tls-key", "MCPQ_REDIS_TLS_KEY", "", "asynq backend: private key (PEM) of --redis-tls-cert")
	e.Int(&r.WaitReplicas, "redis-wait-replicas", "MCPQ_REDIS_WAIT_REPLICAS", 0, "asynq backend: acknowledge a task only once its writes are on this many replicas (Redis WAIT), so a failover to a replica cannot lose it; 0: do not wait")
	e.Duration(&r.WaitTimeout, "redis-wait-timeout", "MCPQ_REDIS_WAIT_TIMEOUT", time.Second, "asynq backend: how long --redis-wait-replicas waits before the call fails")
	e.Secret("redis-password", "redis-sentinel-password")
}

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

// redisTarget reads --redis and the RedisConn flags.
func (o *Options) redisTarget() (*redisTarget, error) {
	r := &o.Redis
	raw := o.RedisURL
	scheme, _, _ := strings.Cut(raw, "://")
	sentinelURL := scheme == "redis+sentinel" || scheme == "rediss+sentinel"
	useTLS := scheme == "rediss" || scheme == "rediss+sentinel"
	if r.Master != "" && r.Sentinels == "" && !sentinelURL {
		return nil, fmt.Errorf("backend: --redis-master %q needs --redis-sentinels (or a redis+sentinel:// URL)", r.Master)
	}
	if r.Sentinels != "" && sentinelURL {
		return nil, fmt.Errorf("backend: --redis-sentinels and a redis+sentinel:// --redis both name the Sentinels: give them once")
	}
	if (r.TLSCA != "" || r.TLSCert != "" || r.TLSKey != "") && !useTLS {
		return nil, fmt.Errorf("backend: --redis-tls-* need a rediss:// (or rediss+sentinel://) --redis URL, got %s://", scheme)
	}
	tc, err := tlsConfig("--redis-tls", r.TLSCA, r.TLSCert, r.TLSKey)
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
			return nil, fmt.Errorf("backend: --redis %q: %w", redactURL(raw), err)
		}
		if r.Sentinels != "" {
			if r.Master == "" {
				return nil, fmt.Errorf("backend: --redis-sentinels needs --redis-master (the Sentinel master name of the primary)")
			}
			t.failover = &redis.FailoverOptions{MasterName: r.Master, SentinelAddrs: SplitList(r.Sentinels),
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
		return fmt.Errorf("backend: --redis %q: %s (want redis+sentinel://[user:password@]host:port[,host:port…]/master[/db])", redactURL(raw), why)
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
	fo.SentinelAddrs = SplitList(authority)
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
func redactURL(s string) string { return shown(s, false) }

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

// replicatedQueue is the Asynq queue whose Enqueue returns only once
// every write so far — the task's record and its job included — is on n
// replicas: after the enqueue it runs INCR on a barrier key and WAIT on one
// connection. WAIT waits for that connection's last write, and replication
// is one ordered stream, so the record and job written before the barrier
// are on the replicas when the barrier is. Embedding the concrete queue
// keeps its other abilities (broker.Depth, broker.Holder).
type replicatedQueue struct {
	*asynqbroker.Queue
	rdb     *redis.Client
	n       int
	timeout time.Duration
	key     string
}

var _ broker.Queue = (*replicatedQueue)(nil)

func (q *replicatedQueue) Enqueue(ctx context.Context, job *broker.Job) error {
	if err := q.Queue.Enqueue(ctx, job); err != nil {
		return err
	}
	var wait *redis.Cmd
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, q.key)
		wait = p.Do(ctx, "WAIT", q.n, q.timeout.Milliseconds())
		return nil
	})
	if err != nil {
		return fmt.Errorf("backend: --redis-wait-replicas: %w", err)
	}
	if got, _ := wait.Int64(); got < int64(q.n) {
		return fmt.Errorf("backend: --redis-wait-replicas %d: only %d replicas had task %s's writes after %s", q.n, got, job.TaskID, q.timeout)
	}
	return nil
}
