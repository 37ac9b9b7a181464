package console_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/console"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

func TestParseAdmins(t *testing.T) {
	for _, c := range []struct {
		entries []string
		tenants bool
		want    []console.Admin
		err     string
	}{
		{entries: []string{"root", "a/b"}, want: []console.Admin{{Subject: "root"}, {Subject: "a/b"}}},
		{entries: []string{"acme/root", "x/y/z"}, tenants: true, want: []console.Admin{{Tenant: "acme", Subject: "root"}, {Tenant: "x", Subject: "y/z"}}},
		{entries: []string{"https://iss|root|acme"}, tenants: true, want: []console.Admin{{Owner: "https://iss|root|acme"}}},
		{entries: []string{"https://iss|root"}, want: []console.Admin{{Owner: "https://iss|root"}}},
		{entries: []string{"root"}, tenants: true, err: `admin "root": with a tenant claim, name an admin as tenant/subject`},
		{entries: []string{"/root"}, tenants: true, err: `admin "/root"`},
		{entries: []string{"acme/"}, tenants: true, err: `admin "acme/"`},
	} {
		got, err := console.ParseAdmins(c.entries, c.tenants)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseAdmins(%q, %v) = %v, %v; want error containing %q", c.entries, c.tenants, got, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("ParseAdmins(%q, %v) = %v, %v; want %v", c.entries, c.tenants, got, err, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("ParseAdmins(%q, %v)[%d] = %+v, want %+v", c.entries, c.tenants, i, got[i], c.want[i])
			}
		}
	}
}

// A subject is unique only within its tenant: an admin named in one tenant
// is not an admin in another, on any console API path.
func TestConsoleTenantAdmins(t *testing.T) {
	admins, err := console.ParseAdmins([]string{"tenant-a/admin"}, true)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, console.Config{
		Admins: admins,
		Authenticate: func(r *http.Request) (console.Identity, error) {
			// The test's tokens are "tenant/subject".
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			tenant, sub, ok2 := strings.Cut(tok, "/")
			if !ok || !ok2 {
				return console.Identity{}, errors.New("no bearer token")
			}
			return console.Identity{Subject: sub, Tenant: tenant, Owner: "iss|" + sub + "|" + tenant}, nil
		},
	})
	tk := f.task(t, "wait", taskstate.Working, 0)
	paths := []struct{ method, path string }{
		{"GET", "/console/api/tasks"},
		{"GET", "/console/api/tasks/" + tk.ID},
		{"GET", "/console/api/nope"},
		{"GET", "/console/api/events"},
		{"POST", "/console/api/tasks/" + tk.ID + "/cancel"},
		{"POST", "/console/api/nope"},
	}
	var e struct{ Error string }
	for _, p := range paths {
		if code := f.do(t, p.method, p.path, "evil-tenant/admin", &e); code != 403 {
			t.Errorf("%s %s as admin of another tenant: %d (%s), want 403", p.method, p.path, code, e.Error)
		}
	}
	if got, _ := f.store.Get(t.Context(), tk.ID); got.Status != taskstate.Working {
		t.Fatalf("a refused cancel changed the task: %s", got.Status)
	}
	if code := f.do(t, "GET", "/console/api/tasks", "tenant-a/admin", &e); code != 200 {
		t.Fatalf("the real admin: %d (%s), want 200", code, e.Error)
	}
	if code := f.do(t, "GET", "/console/api/tasks/"+tk.ID, "tenant-a/admin", &e); code != 200 {
		t.Fatalf("the real admin, detail: %d (%s), want 200", code, e.Error)
	}
}

// A parked task (waiting for its client with no run) shows since when.
func TestConsoleShowsParked(t *testing.T) {
	f := newFixture(t, console.Config{})
	tk := f.task(t, "ask", taskstate.InputRequired, 0)
	since := time.Date(2026, 7, 28, 12, 0, 1, 0, time.UTC)
	if _, err := taskstate.Mutate(t.Context(), f.store, tk.ID, time.Now, func(x *taskstate.Task) error {
		x.Parked = &taskstate.Parked{Since: since, Until: since.Add(time.Hour)}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var ans struct {
		Tasks []struct {
			ID          string     `json:"id"`
			ParkedSince *time.Time `json:"parkedSince"`
		} `json:"tasks"`
	}
	if code := f.do(t, "GET", "/console/api/tasks?status=input_required", "", &ans); code != 200 || len(ans.Tasks) != 1 ||
		ans.Tasks[0].ParkedSince == nil || !ans.Tasks[0].ParkedSince.Equal(since) {
		t.Fatalf("list: %d %+v, want the task parked since %s", code, ans, since)
	}
}
