// Command api is the MCP front end. With no flags it runs all-in-one: an
// embedded NATS server (JetStream, file storage under --data-dir) that also
// listens on --nats-listen so separate workers can join with the key it
// generates in --data-dir (nats.nk), plus an in-process
// worker running the example tools. With --nats (or --broker asynq and
// --redis) it uses that broker and runs no handlers itself; workers do.
//
//	go run ./cmd/api                                  # all-in-one on 127.0.0.1:8080
//	go run ./cmd/api --nats nats://nats:4222 --listen :8080 \
//	    --public-url https://mcp.example.com \
//	    --auth-issuer https://idp.example.com --auth-jwks-url https://idp.example.com/jwks
//
// With --auth-jwks-url (or --auth-hs256-key-file) it is an OAuth 2.1
// resource server: every request needs a bearer token for the canonical
// resource URI (<public-url>/mcp), and /.well-known/oauth-protected-resource
// serves the metadata its 401 challenges point at. Without auth it listens
// only on loopback unless --insecure-no-auth says otherwise.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/console"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/internal/demo"
	"github.com/mcpqueue/mcpqueue/internal/embednats"
	"github.com/mcpqueue/mcpqueue/internal/loopback"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/telemetry"
	"github.com/mcpqueue/mcpqueue/worker"
)

type config struct {
	cli.Options
	worker           worker.Options
	listen           string
	natsListen       string
	natsSync         string
	handover         handoverFlags
	inlineWait       time.Duration
	taskTTL          time.Duration
	allowedHosts     string
	allowedOrigins   string
	asynqmon         bool
	asynqmonReadOnly bool
	console          consoleFlags
	lifecycle        lifecycle
	conns            connFlags
	webhook          webhookFlags // completion webhooks: webhook.go

	publicURL        string
	authJWKSURL      string
	authIssuer       string
	authAudience     string
	authHS256KeyFile string
	authScopes       string
	authTenantClaim  string
	authServers      string
	insecureNoAuth   bool

	maxBody        int64
	maxArgs        int64
	rateLimit      float64
	rateBurst      int
	maxActiveTasks int

	maxScheduleAhead time.Duration // scheduled calls (issue #32 item 1)

	maxSessions int

	reapInterval time.Duration
	publishGrace time.Duration
	stateKey     string // MCPQ_STATE_KEY
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "tasks" || os.Args[1] == "tools" || os.Args[1] == "schedules") { // operator CLI: cmd/api/tasks.go, tools.go, schedules.go
		os.Exit(operatorMain(os.Args[1], os.Args[2:], os.Stdout, os.Stderr))
	}
	var c config
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), apiUsage); fs.PrintDefaults() }
	c.Options.Flags(fs)
	c.worker.Flags(fs)
	c.console.flags(fs)
	c.lifecycle.flags(fs)
	c.conns.flags(fs)
	c.webhook.flags(fs) // webhook.go
	e := cli.EnvOf(fs)
	e.String(&c.listen, "listen", "MCPQ_LISTEN", "127.0.0.1:8080", "HTTP listen address for /mcp, /healthz, /readyz, and /metrics unless --admin serves it")
	e.String(&c.natsListen, "nats-listen", "MCPQ_NATS_LISTEN", "127.0.0.1:4250", "all-in-one: where the embedded NATS listens for workers")
	e.String(&c.natsSync, "nats-sync", "MCPQ_NATS_SYNC", "", "all-in-one: how often the embedded NATS fsyncs its store: a duration, or always (fsync every write before acknowledging it); default 2m, the NATS default. An external NATS sets this in its own config: jetstream { sync_interval: always }")
	c.handover.flags(fs) // handover.go
	e.Duration(&c.inlineWait, "inline-wait", "MCPQ_INLINE_WAIT", 30*time.Millisecond, "how long a task-capable call of a short tool waits to answer with its result instead of a task handle; negative: always a handle")
	e.Duration(&c.taskTTL, "task-ttl", "MCPQ_TASK_TTL", time.Hour, "how long a finished task is kept")
	e.String(&c.allowedHosts, "allowed-hosts", "MCPQ_ALLOWED_HOSTS", "", "comma-separated Host names accepted besides loopback")
	e.String(&c.allowedOrigins, "allowed-origins", "MCPQ_ALLOWED_ORIGINS", "", "comma-separated Origins accepted besides loopback")
	e.Bool(&c.asynqmon, "asynqmon", "MCPQ_ASYNQMON", false, "asynq backend: serve the asynqmon queue dashboard at /asynqmon/; with authentication on only --console-admins may use it (bearer token), and cross-origin writes are refused")
	e.Bool(&c.asynqmonReadOnly, "asynqmon-read-only", "MCPQ_ASYNQMON_READ_ONLY", false, "asynqmon: view only, no deleting or retrying from the UI")
	e.String(&c.publicURL, "public-url", "MCPQ_PUBLIC_URL", "", "the URL clients reach this server at, without /mcp (e.g. https://mcp.example.com); its host is also allowed; default http://<listen> on a loopback address")
	e.String(&c.authJWKSURL, "auth-jwks-url", "MCPQ_AUTH_JWKS_URL", "", "OAuth: the token issuer's JWKS URL (RS256, ES256, EdDSA keys); turns bearer-token authentication on")
	e.String(&c.authIssuer, "auth-issuer", "MCPQ_AUTH_ISSUER", "", "OAuth: the iss every token must carry")
	e.String(&c.authAudience, "auth-audience", "MCPQ_AUTH_AUDIENCE", "", "OAuth: the aud every token must carry; default the canonical resource URI <public-url>/mcp")
	e.String(&c.authHS256KeyFile, "auth-hs256-key-file", "MCPQ_AUTH_HS256_KEY_FILE", "", "OAuth: a file holding a shared HS256 key (at least 32 bytes), instead of --auth-jwks-url; tokens are then HS256 only")
	e.String(&c.authScopes, "auth-scopes", "MCPQ_AUTH_SCOPES", "", "OAuth: scopes every token must carry, comma- or space-separated; a token without them gets 403 insufficient_scope")
	e.String(&c.authTenantClaim, "auth-tenant-claim", "MCPQ_AUTH_TENANT_CLAIM", "", "OAuth: a claim naming the tenant; tasks are then owned by issuer, subject and tenant, and tokens without it are refused")
	e.String(&c.authServers, "auth-authorization-server", "MCPQ_AUTH_AUTHORIZATION_SERVER", "", "OAuth: authorization server issuer URLs listed in the protected resource metadata, comma-separated; default --auth-issuer")
	e.Bool(&c.insecureNoAuth, "insecure-no-auth", "MCPQ_INSECURE_NO_AUTH", false, "serve without authentication on a non-loopback --listen address: anyone who reaches it can run tools")
	e.Int64(&c.maxBody, "max-body", "MCPQ_MAX_BODY", mcpfront.DefaultMaxBody, "largest request body in bytes")
	e.Int64(&c.maxArgs, "max-args", "MCPQ_MAX_ARGS", mcpfront.DefaultMaxArgs, "largest arguments of a tools/call or prompts/get in bytes; past it the call is refused before anything is queued; keep --max-body above it")
	e.Float64(&c.rateLimit, "rate-limit", "MCPQ_RATE_LIMIT", 0, "requests per second each principal (or client address, without auth) may send; 0: no limit")
	e.Int(&c.rateBurst, "rate-burst", "MCPQ_RATE_BURST", 0, "requests a principal may send at once (the token bucket's size); default --rate-limit rounded up")
	e.Int(&c.maxActiveTasks, "max-active-tasks", "MCPQ_MAX_ACTIVE_TASKS", -1, "tasks one owner (authenticated principal, or 2025-11-25 session without auth) may have not yet ended; -1: 1000 with authentication on, no cap without; 0: no cap")
	e.Duration(&c.maxScheduleAhead, "max-schedule-ahead", "MCPQ_MAX_SCHEDULE_AHEAD", mcpfront.DefaultMaxScheduleAhead, "how far ahead a tools/call's _meta[\"io.mcpqueue/not-before\"] may schedule it; later is refused with -32602") // scheduled calls
	e.Int(&c.maxSessions, "max-sessions-per-principal", "MCPQ_MAX_SESSIONS_PER_PRINCIPAL", 256, "2025-11-25 sessions one authenticated principal may keep open (not yet expired or deleted), across replicas; past it initialize is refused with -32029; 0: no cap")
	e.Duration(&c.reapInterval, "reap-interval", "MCPQ_REAP_INTERVAL", 5*time.Second, "how often the reaper scans active tasks for lost workers (lapsed leases: requeue, or fail after --max-attempts) and lost jobs (at least 10× as long as the last pass took); 0: no reaper")
	e.Duration(&c.publishGrace, "publish-grace", "MCPQ_PUBLISH_GRACE", 30*time.Second, "how long a task may wait with no worker holding it before the reaper checks that the queue still holds its job, and republishes it if not")
	e.EnvOnly(&c.stateKey, "MCPQ_STATE_KEY", true)
	cli.ParseFlagsOrExit(fs, os.Args[1:])
	if fs.NArg() > 0 { // words after the flags: help, or a mistake
		fs.SetOutput(os.Stdout)
		os.Exit(command(fs.Arg(0), fs.Usage, os.Stderr))
	}

	log := c.Logger("api")
	c.handover.handleAfter = c.handover.resolve(fs, log)
	ctx, stop := notifyContext() // lifecycle.go: SIGINT or SIGTERM, and which
	defer stop()
	if err := run(ctx, &c, log); err != nil {
		log.Error().Err(err).Msg("api failed")
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

const apiUsage = `usage: api [flags]           serve MCP at http://<--listen>/mcp (default 127.0.0.1:8080)
       api tasks <command>   task records: list, get, cancel, purge (api tasks -h)
       api tools <command>   the tool catalog: list, rm (api tools -h)
       api schedules <command>  recurring schedules: add, list, rm (api schedules -h)
       api help              this text

With no --nats and --broker nats (the defaults) api runs all-in-one: an
embedded NATS (store under --data-dir, workers may join at --nats-listen)
and the demo tools in-process. With --nats, or --broker asynq and --redis,
it runs no tools itself: start workers (cmd/worker) on the same backend.
GET / says where things are; the task console is at /console/.

Every flag can also be set by the environment variable named after it.
Flags:
`

// command answers the first word on the command line after the flags:
// help prints the usage (status 0); anything else is a usage error (status
// 2) naming the commands, so a typo never starts a server.
func command(word string, usage func(), stderr io.Writer) int {
	switch word {
	case "help":
		usage()
		return 0
	case "tasks", "tools", "schedules":
		fmt.Fprintf(stderr, "api: %s is a command: put it first, before its flags (api %s -h)\n", word, word)
	default:
		fmt.Fprintf(stderr, "api: unknown command %q: the commands are tasks, tools, schedules and help; api with flags only serves (api -h lists the flags)\n", word)
	}
	return 2
}

// authenticator checks the auth settings against the listen address and
// builds the bearer-token Authenticator (nil: authentication off, which is
// allowed on loopback or with --insecure-no-auth only).
func (c *config) authenticator(ctx context.Context, log zerolog.Logger) (*jwtauth.Authenticator, error) {
	onLoopback := loopback.Addr(c.listen)
	if c.authJWKSURL == "" && c.authHS256KeyFile == "" {
		for flag, v := range map[string]string{"--auth-issuer": c.authIssuer, "--auth-audience": c.authAudience, "--auth-scopes": c.authScopes, "--auth-tenant-claim": c.authTenantClaim, "--auth-authorization-server": c.authServers} {
			if v != "" {
				return nil, fmt.Errorf("%s needs --auth-jwks-url or --auth-hs256-key-file", flag)
			}
		}
		if !onLoopback {
			if !c.insecureNoAuth {
				return nil, fmt.Errorf("refusing to serve %s without authentication: configure --auth-jwks-url (or --auth-hs256-key-file), listen on a loopback address, or pass --insecure-no-auth", c.listen)
			}
			log.Warn().Str("listen", c.listen).Msg("serving WITHOUT AUTHENTICATION on a non-loopback address (--insecure-no-auth): anyone who reaches it can run tools and read tasks by id")
		}
		return nil, nil
	}
	if c.authIssuer == "" {
		return nil, errors.New("--auth-issuer is required with --auth-jwks-url or --auth-hs256-key-file")
	}
	audience := c.authAudience
	if audience == "" {
		base, err := c.publicBase()
		if err != nil {
			return nil, err
		}
		if base == "" {
			return nil, fmt.Errorf("--public-url (or --auth-audience) is required with authentication on %s: tokens are checked for the canonical resource URI <public-url>/mcp", c.listen)
		}
		audience = base + "/mcp"
	}
	cfg := &jwtauth.Config{
		Issuer: c.authIssuer, Audience: audience, JWKSURL: c.authJWKSURL,
		Scopes:               strings.FieldsFunc(c.authScopes, func(r rune) bool { return r == ',' || r == ' ' }),
		TenantClaim:          c.authTenantClaim,
		AuthorizationServers: cli.SplitList(c.authServers),
		Logger:               log.With().Str("component", "auth").Logger(),
	}
	if c.authHS256KeyFile != "" {
		if c.authJWKSURL != "" {
			return nil, errors.New("--auth-jwks-url and --auth-hs256-key-file exclude each other")
		}
		key, err := os.ReadFile(c.authHS256KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--auth-hs256-key-file: %w", err)
		}
		cfg.HS256Key = bytes.TrimSpace(key)
	}
	a, err := jwtauth.New(cfg)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.Refresh(rctx); err != nil {
		log.Warn().Err(err).Str("jwks", c.authJWKSURL).Msg("cannot fetch the JWKS yet; tokens are refused until it can be fetched")
	}
	log.Info().Str("issuer", c.authIssuer).Str("audience", audience).Strs("scopes", cfg.Scopes).Str("metadata", a.MetadataURL()).Msg("bearer-token authentication on")
	return a, nil
}

// publicBase is --public-url without a trailing slash, or http://<listen>
// on a loopback address with a host ("" when there is none to derive).
func (c *config) publicBase() (string, error) {
	if c.publicURL != "" {
		u, err := url.Parse(c.publicURL)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.RawQuery != "" || u.Fragment != "" {
			return "", fmt.Errorf("--public-url %q must be an absolute http(s) URL without query or fragment", c.publicURL)
		}
		return strings.TrimSuffix(c.publicURL, "/"), nil
	}
	if h, _, err := net.SplitHostPort(c.listen); err == nil && h != "" && loopback.Addr(c.listen) {
		return "http://" + c.listen, nil
	}
	return "", nil
}

// faultHook returns the fault to inject between writing a task's record and
// publishing its job, named by MCPQ_FAULT, for the fault suite:
// "kill-after-record" SIGKILLs this process there. Unset: none; anything
// else refuses to start.
func faultHook(log zerolog.Logger) (func(*taskstate.Task), error) {
	switch f := os.Getenv("MCPQ_FAULT"); f {
	case "":
		return nil, nil
	case "kill-after-record":
		log.Warn().Str("fault", f).Msg("fault injection on: the first task record written kills this process before its job is published")
		return func(t *taskstate.Task) {
			log.Warn().Str("task", t.ID).Msg("fault: killing the api between record and publish")
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}, nil
	default:
		return nil, fmt.Errorf("MCPQ_FAULT=%q: want kill-after-record, or leave it unset", f)
	}
}

func run(ctx context.Context, c *config, log zerolog.Logger) error {
	// Settings first: a server that must not start fails before it
	// touches NATS or Redis.
	st, err := c.settings(ctx, log)
	if err != nil {
		return err
	}
	// The addresses next, before anything starts: one in use (a second
	// all-in-one api) fails at once, naming it.
	natsListen := ""
	if st.allInOne {
		natsListen = c.natsListen
	}
	ls, err := openListeners(c.listen, c.worker.Admin, natsListen)
	if err != nil {
		return err
	}
	defer ls.close()
	// Everything started below stops when run returns, also on an error.
	ctx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	b, closeBackend, err := c.startBackend(ctx, st.allInOne, log)
	if err != nil {
		return err
	}
	defer closeBackend()
	reg := cli.NewRegistry()
	tel, flush, err := c.startTelemetry(ctx, b, reg)
	if err != nil {
		return err
	}
	defer cli.FlushSpans(flush, log)
	if !st.allInOne {
		c.hintWorkers(ctx, b.Catalog, log)
	}

	var wg sync.WaitGroup
	if st.allInOne {
		if ready, err := c.startWorker(ctx, b, &wg, log); !ready {
			return err // nil: ctx ended first
		}
	}
	prod := producer.New(b.Store, producer.QueueExecutor{Queue: b.Queue, Bus: b.Bus}, &producer.Config{
		TTL: c.taskTTL, Logger: log, Telemetry: tel, AfterRecord: st.fault,
	})
	c.startReaper(ctx, prod, tel, &wg)
	if err := c.webhook.start(ctx, b, reg, &wg, log); err != nil { // webhook.go
		return err
	}
	hosts := c.hosts()
	front := c.newFront(prod, b, reg, tel, st.authn, hosts, log)
	var metricsGuard func(http.Handler) http.Handler
	if st.authn != nil && c.worker.Admin == "" {
		metricsGuard = operatorsOnly(st.authn, st.admins)
		log.Warn().Msg("/metrics is on the public port and answers only a global console admin's token there (authentication is on: --console-admins, */subject with a tenant claim); serve it to your scraper with --admin instead")
	}
	mux, admin := c.lifecycle.muxes(c.worker.Admin, reg, cli.Checks(b), metricsGuard) // /healthz, /readyz, /metrics: lifecycle.go
	mux.Handle("/mcp", tel.InstrumentHTTP(front))
	if st.authn != nil {
		mountMetadata(mux, st.authn.Metadata())
	}
	consoleOn := c.console.mount(ctx, mux, st.authn, st.admins, prod, b, hosts, log)
	mux.Handle("GET /{$}", rootPage(consoleOn)) // GET and HEAD of exactly "/"
	if c.asynqmon {
		closeMon, err := c.mountAsynqmon(mux, st.authn, st.admins, hosts, log) // console.go
		if err != nil {
			return err
		}
		defer closeMon()
	}

	// Headers within 10 s (a token-less request is refused right after
	// them); the body within --body-timeout, whichever handler serves it,
	// and a body left unread is not waited for (guardBodies, conns.go);
	// each write within --write-timeout (mcpfront: per request, so streams
	// live on); idle keep-alive connections for --idle-timeout.
	srv := &http.Server{Handler: guardBodies(mux, c.conns.bodyTimeout), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: c.conns.idleTimeout}
	srv.RegisterOnShutdown(front.EndListens) // listen streams end gracefully, not at the deadline
	log.Info().Bool("all_in_one", st.allInOne).Str("broker", c.Broker).Bool("auth", st.authn != nil).Msg("api starting")
	err = c.lifecycle.serve(ctx, srv, ls, admin, &c.conns, log)
	cancelRun() // a serve error stops the in-process worker and the reaper too
	wg.Wait()
	return err
}

// runSettings is what run derives from the configuration before it starts
// anything.
type runSettings struct {
	authn    *jwtauth.Authenticator // nil: no authentication
	fault    func(*taskstate.Task)
	admins   []console.Admin
	allInOne bool // no --nats: an embedded NATS and the demo tools in-process
}

// settings checks the configuration and derives runSettings from it.
func (c *config) settings(ctx context.Context, log zerolog.Logger) (*runSettings, error) {
	if err := c.worker.Check(); err != nil {
		return nil, err
	}
	if err := c.webhook.check(); err != nil { // webhook.go
		return nil, err
	}
	authn, err := c.authenticator(ctx, log)
	if err != nil {
		return nil, err
	}
	fault, err := faultHook(log)
	if err != nil {
		return nil, err
	}
	admins, err := console.ParseAdmins(cli.SplitList(c.console.admins), c.authTenantClaim != "")
	if err != nil {
		return nil, err
	}
	allInOne := c.NATS.URL == "" && (c.Broker == "nats" || c.Broker == "")
	if c.natsSync != "" && !allInOne {
		return nil, errors.New("--nats-sync applies to the embedded NATS of the all-in-one mode only; set an external server's policy in its config: jetstream { sync_interval: always }")
	}
	return &runSettings{authn: authn, fault: fault, admins: admins, allInOne: allInOne}, nil
}

// startBackend starts the embedded NATS (all-in-one) and connects to the
// backend; the function it returns closes both.
func (c *config) startBackend(ctx context.Context, allInOne bool, log zerolog.Logger) (*backend.Backend, func(), error) {
	stop := func() {}
	if allInOne {
		ns, err := embednats.Start(&c.NATS, c.natsListen, c.natsSync, log) // sets NATS.URL and the credentials
		if err != nil {
			return nil, nil, err
		}
		stop = ns.Shutdown
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	b, err := c.Connect(cctx, "api", log)
	cancel()
	if err != nil {
		stop()
		return nil, nil, err
	}
	return b, func() { b.Close(); stop() }, nil
}

// startTelemetry sets up tracing (the global provider too: handlers' own
// spans join the task's trace) and the metrics on reg; flush sends the
// spans left.
func (c *config) startTelemetry(ctx context.Context, b *backend.Backend, reg *prometheus.Registry) (*telemetry.Telemetry, func(context.Context) error, error) {
	tp, flush, err := c.TracerProvider(ctx, "api")
	if err != nil {
		return nil, nil, err
	}
	cli.SetGlobalTracing(tp)
	tel := cli.Telemetry(b, reg, tp)
	tel.WatchQueue(cli.QueueDepth(b), catalogRoutes(b.Catalog))
	c.worker.Telemetry = tel
	return tel, flush, nil
}

// startWorker runs the demo tools in-process (all-in-one) and waits until
// they are in the catalog: true then; false with the worker's error, or
// with nil when ctx ended first.
func (c *config) startWorker(ctx context.Context, b *backend.Backend, wg *sync.WaitGroup, log zerolog.Logger) (bool, error) {
	mux := consumer.NewMux()
	demo.Register(mux)
	cfg := c.worker.Config
	cfg.Logger = log.With().Str("service", "worker").Logger()
	w := consumer.New(*b, &cfg)
	runErr := make(chan error, 1)
	wg.Go(func() {
		err := w.Run(ctx, mux)
		if err != nil {
			log.Error().Err(err).Msg("in-process worker stopped")
		}
		runErr <- err
	})
	select {
	case <-w.Ready():
		return true, nil
	case err := <-runErr:
		return false, fmt.Errorf("in-process worker: %w", err)
	case <-ctx.Done():
		wg.Wait()
		return false, nil
	}
}

// startReaper runs the reaper until ctx ends, unless --reap-interval is 0.
func (c *config) startReaper(ctx context.Context, prod *producer.Producer, tel *telemetry.Telemetry, wg *sync.WaitGroup) {
	wg.Go(func() { prod.RunSchedules(ctx, nil) }) // recurring schedules (issue #32 item 5): every replica fires them
	if c.reapInterval <= 0 {
		return
	}
	wg.Go(func() {
		prod.Reap(ctx, &producer.ReaperConfig{
			Interval:     c.reapInterval,
			PublishGrace: c.publishGrace,
			MaxAttempts:  c.worker.MaxAttempts,
			LeaseExpired: tel.LeaseExpired,
		})
	})
}

// hosts are the Host headers the api answers: --allowed-hosts, the
// --listen host and the --public-url host.
func (c *config) hosts() []string {
	hosts := cli.SplitList(c.allowedHosts)
	if h, _, err := net.SplitHostPort(c.listen); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if u, err := url.Parse(c.publicURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}

// newFront is the MCP endpoint as the flags configure it.
func (c *config) newFront(prod *producer.Producer, b *backend.Backend, reg *prometheus.Registry, tel *telemetry.Telemetry, authn *jwtauth.Authenticator, hosts []string, log zerolog.Logger) *mcpfront.Server {
	var fauth auth.Authenticator // stays nil without auth (not a nil *jwtauth.Authenticator)
	if authn != nil {
		fauth = authn
	}
	return mcpfront.New(prod, *b, &mcpfront.Config{
		Metrics:        reg,
		StateKey:       []byte(c.stateKey),
		AllowedHosts:   hosts,
		AllowedOrigins: cli.SplitList(c.allowedOrigins),
		HandleAfter:    c.handover.handleAfter,
		MirrorToolsOff: c.handover.mirrorTools == "off",
		InlineWait:     c.inlineWait,
		MaxBody:        c.maxBody,
		MaxArgs:        c.maxArgs,
		RateLimit:      c.rateLimit,
		RateBurst:      c.rateBurst,
		MaxActiveTasks: activeCap(c.maxActiveTasks, authn != nil),
		MaxSessions:    c.maxSessions,
		BodyTimeout:    c.conns.bodyTimeout,
		WriteTimeout:   c.conns.writeTimeout,
		Auth:           fauth,
		Logger:         log,
		Telemetry:      tel,

		MaxScheduleAhead: c.maxScheduleAhead, // scheduled calls

		// completion webhooks: webhook.go
		Webhooks: c.webhook.list, MaxPendingWebhooks: c.webhook.maxPending,
	})
}

// mountMetadata serves the protected resource metadata (RFC 9728) at the
// path-suffixed URL the challenges name, and the root one clients fall
// back to.
func mountMetadata(mux *http.ServeMux, md auth.Metadata) {
	h := auth.MetadataHandler(md)
	paths := []string{auth.WellKnownPath, auth.WellKnownPath + "/mcp"}
	if u, err := url.Parse(md.Resource); err == nil && strings.TrimSuffix(u.EscapedPath(), "/") != "" {
		paths = append(paths, auth.WellKnownPath+strings.TrimSuffix(u.EscapedPath(), "/"))
	}
	for i, p := range paths {
		if !slices.Contains(paths[:i], p) {
			mux.Handle(p, h)
		}
	}
}

// hintWorkers logs how to start a worker when the catalog is empty: an api
// on --nats or on Redis runs no tools itself, and a first run of
// `api --broker asynq` would otherwise list none without saying why.
func (c *config) hintWorkers(ctx context.Context, cat taskstate.Catalog, log zerolog.Logger) {
	tools, err := cat.Tools(ctx)
	if err != nil || len(tools) > 0 {
		return
	}
	cmd := "go run ./cmd/worker --nats " + redactURL(c.NATS.URL)
	if c.IsRedis() {
		cmd = "go run ./cmd/worker --broker asynq --redis " + redactURL(c.Redis.URL)
	}
	if c.Prefix != "mcpq" {
		cmd += " --prefix " + c.Prefix
	}
	log.Warn().Str("start_one", cmd).Msg("no tools yet: this api runs none itself (only the all-in-one, without --nats, does); start a worker on the same backend and --prefix")
}

// redactURL is u with its password masked; u itself when it does not parse
// as one URL (a comma-separated list, a Sentinel address).
func redactURL(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Redacted()
	}
	return u
}

// rootPage answers GET / with a page pointing at /mcp (and /console/ when it
// is mounted), so a browser pointed at the server finds its way.
func rootPage(consoleOn bool) http.Handler {
	console := ""
	if consoleOn {
		console = `<li><a href="/console/">/console/</a>: the task console, to watch and cancel tasks in a browser</li>`
	}
	page := `<!doctype html>
<html><head><meta charset="utf-8"><title>mcpqueue</title></head><body>
<h1>mcpqueue</h1>
<p>This is an MCP server: it runs tool calls as durable tasks.</p>
<ul>
<li><a href="/mcp">/mcp</a>: the MCP endpoint (Streamable HTTP); point your MCP client at this URL</li>
` + console + `
<li><a href="/healthz">/healthz</a>, <a href="/readyz">/readyz</a>: health</li>
</ul>
</body></html>
`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	})
}

// catalogRoutes lists the routes (catalog keys) of every tool and prompt in
// the catalog, for the per-tool queue gauges.
func catalogRoutes(c taskstate.Catalog) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		tools, err := c.Tools(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(tools))
		for i, t := range tools {
			out[i] = t.Key()
		}
		return out, nil
	}
}

// operatorsOnly admits a request whose bearer token is a console admin's
// who sees every tenant (console.Admit): 401 with the authenticator's
// challenge without a valid token, 403 for anyone else. The metrics count
// every tenant's tasks, so a tenant's admin does not get them.
func operatorsOnly(a *jwtauth.Authenticator, admins []console.Admin) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := a.Authenticate(r)
			if err != nil {
				w.Header().Set("WWW-Authenticate", a.Challenge(r, err))
				http.Error(w, "a console admin's bearer token is required for /metrics on the public port (serve it with --admin instead)", http.StatusUnauthorized)
				return
			}
			if ok, every := console.Admit(admins, identityOf(p)); !ok || !every {
				http.Error(w, "/metrics on the public port answers only a console admin who sees every tenant (--console-admins); serve it with --admin instead", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// defaultActiveCap is --max-active-tasks with authentication on, unless set:
// one principal cannot fill the store (and the queues) with unbounded work.
const defaultActiveCap = 1000

func activeCap(flag int, authOn bool) int {
	switch {
	case flag >= 0:
		return flag
	case authOn:
		return defaultActiveCap
	}
	return 0
}
