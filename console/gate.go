package console

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
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
// returns who the caller is ("anonymous" without authentication).
func (g *Gate) admit(w http.ResponseWriter, r *http.Request) (who string, ok bool) {
	if o := r.Header.Get("Origin"); r.Method != http.MethodGet && r.Method != http.MethodHead && o != "" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			writeErr(w, http.StatusForbidden, "cross-origin request from "+strconv.Quote(o)+" refused")
			return "", false
		}
	}
	if g.Authenticate == nil {
		return "anonymous", true
	}
	id, err := g.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcpqueue console"`)
		writeErr(w, http.StatusUnauthorized, "a console admin's bearer token is required: "+err.Error())
		return "", false
	}
	if !slices.ContainsFunc(g.Admins, func(a Admin) bool { return a.Admits(id) }) {
		writeErr(w, http.StatusForbidden, strconv.Quote(id.String())+" is not a console admin (--console-admins)")
		return "", false
	}
	return id.String(), true
}

func (g *Gate) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" || slices.Contains(g.AllowedHosts, host) {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
