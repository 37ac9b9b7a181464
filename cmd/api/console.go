package main

import (
	"context"
	"flag"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/console"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// consoleFlags are the task console's settings.
type consoleFlags struct {
	on     bool
	admins string
}

func (f *consoleFlags) flags(fs *flag.FlagSet) {
	e := backend.EnvOf(fs)
	e.Bool(&f.on, "console", "MCPQ_CONSOLE", true, "serve the task console at /console/; with authentication on it answers only --console-admins")
	e.String(&f.admins, "console-admins", "MCPQ_CONSOLE_ADMINS", "", "comma-separated console admins when authentication is on: subjects (sub), or tenant/subject with --auth-tenant-claim (an admin of that tenant's tasks only), */subject (a global operator), or owner keys")
}

// mount adds the console to mux: open without authentication (loopback or
// --insecure-no-auth, like the API), admins only with it, and not at all
// when authentication is on and no admin is named.
// admins are the parsed --console-admins (console.ParseAdmins).
func (f *consoleFlags) mount(ctx context.Context, mux *http.ServeMux, authn *jwtauth.Authenticator, admins []console.Admin, prod *producer.Producer, store taskstate.Store, hosts []string, log zerolog.Logger) {
	if !f.on {
		return
	}
	cfg := console.Config{Store: store, Producer: prod, AllowedHosts: hosts}
	if authn != nil {
		cfg.Admins = admins
		if len(cfg.Admins) == 0 {
			log.Warn().Msg("task console not mounted: authentication is on and --console-admins names no one")
			return
		}
		cfg.Authenticate = func(r *http.Request) (console.Identity, error) {
			p, err := authn.Authenticate(r)
			return identityOf(p), err
		}
	}
	mux.Handle(console.Path, console.New(ctx, cfg))
	names := make([]string, len(cfg.Admins))
	for i, a := range cfg.Admins {
		names[i] = a.String()
	}
	log.Info().Str("path", console.Path).Strs("admins", names).Bool("auth", authn != nil).Msg("task console mounted")
}

// identityOf is the console's view of a principal.
func identityOf(p auth.Principal) console.Identity {
	return console.Identity{Subject: p.Subject, Tenant: p.Tenant, Owner: p.Owner()}
}
