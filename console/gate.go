package console

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/mcpqueue/mcpqueue/internal/loopback"
)

// Gate admits requests to an operator's page: the console's API, or another
// dashboard the api serves beside it (asynqmon). A request must name a Host
// this server answers to (so a DNS-rebinding page cannot reach a server on
// localhost); a write (any method but GET and HEAD) must come from the
// server's own origin; and with Authenticate set the caller must be one of
// Admins.
type Gate struct {
	// Authenticate, if set, identifies the caller from its bearer token;
	// nil admits everyone (an api running without authentication).
	Authenticate func(r *http.Request) (Identity, error)
	Admins       []Admin
	// EveryTenant admits only the admins who see every tenant's tasks
	// (named "*/subject", or any admin without a tenant claim): a page that
	// shows all tasks at once (asynqmon) cannot be scoped to one tenant.
	EveryTenant bool
	// AllowedHosts are Host names accepted besides loopback ones.
	AllowedHosts []string
}

// Wrap returns h behind the gate: a refused request gets 401 or 403 with a
// JSON error and never reaches h.
func (g *Gate) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			writeErr(w, http.StatusForbidden, "host "+strconv.Quote(r.Host)+" is not allowed")
			return
		}
		if _, ok := g.admit(w, r); ok {
			h.ServeHTTP(w, r)
		}
	})
}

// admit checks r's origin and caller, answering the refusal itself; it
// returns who the caller is ("anonymous" without authentication) and, for a
// tenant's admin, the tenant it is scoped to.
func (g *Gate) admit(w http.ResponseWriter, r *http.Request) (who caller, ok bool) {
	if o := r.Header.Get("Origin"); r.Method != http.MethodGet && r.Method != http.MethodHead && o != "" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			writeErr(w, http.StatusForbidden, "cross-origin request from "+strconv.Quote(o)+" refused")
			return caller{}, false
		}
	}
	if g.Authenticate == nil {
		return caller{who: "anonymous"}, true
	}
	id, err := g.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcpqueue console"`)
		writeErr(w, http.StatusUnauthorized, "a console admin's bearer token is required: "+err.Error())
		return caller{}, false
	}
	ok, everyTenant := Admit(g.Admins, id)
	if !ok {
		writeErr(w, http.StatusForbidden, strconv.Quote(id.String())+" is not a console admin (--console-admins)")
		return caller{}, false
	}
	who = caller{who: id.String()}
	if !everyTenant {
		if g.EveryTenant {
			writeErr(w, http.StatusForbidden, strconv.Quote(id.String())+" is an admin of its own tenant only; this page shows every tenant's tasks (name a global operator \"*/subject\" in --console-admins)")
			return caller{}, false
		}
		who.owner = id.Owner
	}
	return who, true
}

func (g *Gate) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return loopback.Host(host) || slices.Contains(g.AllowedHosts, host)
}
