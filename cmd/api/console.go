package main

import (
	"context"
	"errors"
	"flag"
	"net/http"

	"github.com/hibiken/asynqmon"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/console"
	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/producer"
)

// consoleFlags are the task console's settings.
type consoleFlags struct {
	on     bool
	admins string
}

func (f *consoleFlags) flags(fs *flag.FlagSet) {
	e := cli.EnvOf(fs)
	e.Bool(&f.on, "console", "MCPQ_CONSOLE", true, "serve the task console at /console/; with authentication on it answers only --console-admins")
	e.String(&f.admins, "console-admins", "MCPQ_CONSOLE_ADMINS", "", "comma-separated console admins when authentication is on: subjects (sub), or tenant/subject with --auth-tenant-claim (an admin of that tenant's tasks only), */subject (a global operator), or owner keys")
}

// mount adds the console to mux: open without authentication (loopback or
// --insecure-no-auth, like the API), admins only with it, and not at all
// when authentication is on and no admin is named.
// admins are the parsed --console-admins (console.ParseAdmins). It reports
// whether it mounted the console.
func (f *consoleFlags) mount(ctx context.Context, mux *http.ServeMux, authn *jwtauth.Authenticator, admins []console.Admin, prod *producer.Producer, b *backend.Backend, hosts []string, log zerolog.Logger) bool {
	if !f.on {
		return false
	}
	cfg := console.Config{Store: b.Store, Catalog: b.Catalog, Producer: prod, AllowedHosts: hosts}
	cfg.Depth, _ = b.Queue.(broker.Depth) // the queue view's broker depth, when the broker can tell
	if authn != nil {
		cfg.Admins = admins
		if len(cfg.Admins) == 0 {
			log.Warn().Msg("task console not mounted: authentication is on and --console-admins names no one")
			return false
		}
		cfg.Authenticate = identify(authn)
	}
	mux.Handle(console.Path, console.New(ctx, cfg))
	names := make([]string, len(cfg.Admins))
	for i, a := range cfg.Admins {
		names[i] = a.String()
	}
	log.Info().Str("path", console.Path).Strs("admins", names).Bool("auth", authn != nil).Msg("task console mounted")
	return true
}

// identify is the console's view of a's principal.
func identify(a *jwtauth.Authenticator) func(*http.Request) (console.Identity, error) {
	return func(r *http.Request) (console.Identity, error) {
		p, err := a.Authenticate(r)
		return identityOf(p), err
	}
}

// mountAsynqmon adds asynqmon (--asynqmon) to mux behind the console's gate:
// Host checked and cross-origin writes refused always, and with
// authentication on only --console-admins admitted (admins, parsed). It
// returns asynqmon's closer.
func (c *config) mountAsynqmon(mux *http.ServeMux, authn *jwtauth.Authenticator, admins []console.Admin, hosts []string, log zerolog.Logger) (func(), error) {
	if c.Broker != "asynq" {
		return nil, errors.New("--asynqmon needs --broker asynq")
	}
	gate := &console.Gate{AllowedHosts: hosts, EveryTenant: true}
	if authn != nil {
		if len(admins) == 0 {
			return nil, errors.New("--asynqmon with authentication on needs --console-admins: only they may use it (it shows every task's arguments and owner, and can pause queues)")
		}
		gate.Authenticate, gate.Admins = identify(authn), admins
	}
	opt, err := c.AsynqConnOpt()
	if err != nil {
		return nil, err
	}
	mon := asynqmon.New(asynqmon.Options{RootPath: "/asynqmon", RedisConnOpt: opt, ReadOnly: c.asynqmonReadOnly})
	mux.Handle("/asynqmon/", gate.Wrap(mon))
	ev := log.Info()
	if authn == nil {
		ev = log.Warn().Str("note", "authentication is off: anyone who reaches --listen sees every task's arguments and owner there, and can pause queues and delete jobs unless --asynqmon-read-only")
	}
	ev.Str("url", "http://"+c.listen+"/asynqmon/").Bool("read_only", c.asynqmonReadOnly).Bool("auth", authn != nil).Msg("asynqmon mounted")
	return func() { _ = mon.Close() }, nil
}

// identityOf is the console's view of a principal.
func identityOf(p auth.Principal) console.Identity {
	return console.Identity{Subject: p.Subject, Tenant: p.Tenant, Owner: p.Owner()}
}
