package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpqueue/mcpqueue/console"
)

// A gate with EveryTenant (asynqmon's: it shows every tenant's tasks)
// admits a global operator and refuses a tenant's admin with 403; without
// it, the tenant's admin is admitted too.
func TestGateEveryTenant(t *testing.T) {
	admins, err := console.ParseAdmins([]string{"T1/admin", "*/ops"}, true)
	if err != nil {
		t.Fatal(err)
	}
	identify := func(r *http.Request) (console.Identity, error) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		tenant, sub, _ := strings.Cut(tok, "/")
		return console.Identity{Subject: sub, Tenant: tenant, Owner: "iss|" + sub + "|" + tenant}, nil
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for _, c := range []struct {
		every bool
		token string
		want  int
	}{
		{true, "T9/ops", http.StatusNoContent},
		{true, "T1/admin", http.StatusForbidden},
		{true, "T1/user", http.StatusForbidden},
		{false, "T1/admin", http.StatusNoContent},
		{false, "T9/ops", http.StatusNoContent},
	} {
		g := &console.Gate{Authenticate: identify, Admins: admins, EveryTenant: c.every}
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/asynqmon/api/queues", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		rec := httptest.NewRecorder()
		g.Wrap(ok).ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("EveryTenant %v, %s: %d %s, want %d", c.every, c.token, rec.Code, rec.Body, c.want)
		}
	}
}
