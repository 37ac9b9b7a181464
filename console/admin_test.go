package console_test

import (
	"errors"
	"net/http"
	"slices"
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
		{entries: []string{"*/ops"}, tenants: true, want: []console.Admin{{Subject: "ops", EveryTenant: true}}},
		{entries: []string{"*/"}, tenants: true, err: `admin "*/"`},
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
		{"GET", "/console/api/queue"},
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
}

// An admin of a tenant sees, reads and cancels its own tenant's tasks only;
// another tenant's task is no task at all to it. A "*/subject" admin sees
// every tenant's.
func TestConsoleAdminScopedToTenant(t *testing.T) {
	f := tenantFixture(t, "T1/admin", "T2/admin", "*/ops")
	owned := func(owner string) string {
		now := time.Now().UTC()
		tk := &taskstate.Task{ID: taskstate.NewID(), Tool: "wait", Owner: owner, Era: taskstate.Era20260728, Mode: taskstate.ModeTask,
			Status: taskstate.Working, CreatedAt: now, LastUpdatedAt: now, TTLMs: 60_000}
		if err := f.store.Create(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	t1, t1b, t2 := owned("iss|user|T1"), owned("iss|other|T1"), owned("iss|user|T2")
	other := owned("other-iss|user|T1") // T1 of another issuer is another tenant
	listed := func(token string) []string {
		var ans listAnswer
		if code := f.do(t, "GET", "/console/api/tasks", token, &ans); code != 200 {
			t.Fatalf("list as %s: %d", token, code)
		}
		var ids []string
		for _, r := range ans.Tasks {
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		return ids
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
	if got, want := listed("T1/admin"), sorted(t1, t1b); !slices.Equal(got, want) {
		t.Fatalf("T1/admin lists %v, want T1's tasks only %v", got, want)
	}
	if got, want := listed("X/ops"), sorted(t1, t1b, t2, other); !slices.Equal(got, want) {
		t.Fatalf("*/ops lists %v, want every task %v", got, want)
	}
	var e struct{ Error string }
	for _, id := range []string{t2, other} {
		if code := f.do(t, "GET", "/console/api/tasks/"+id, "T1/admin", &e); code != 404 {
			t.Errorf("T1/admin reading another tenant's task: %d (%s), want 404", code, e.Error)
		}
		if code := f.do(t, "POST", "/console/api/tasks/"+id+"/cancel", "T1/admin", &e); code != 404 {
			t.Errorf("T1/admin cancelling another tenant's task: %d (%s), want 404", code, e.Error)
		}
		if got, _ := f.store.Get(t.Context(), id); got.Status != taskstate.Working {
			t.Fatalf("T1/admin's refused cancel changed another tenant's task: %s", got.Status)
		}
	}
	if code := f.do(t, "POST", "/console/api/tasks/"+t1b+"/cancel", "T1/admin", &e); code != 200 {
		t.Fatalf("T1/admin cancelling a T1 task: %d (%s), want 200", code, e.Error)
	}
	if code := f.do(t, "POST", "/console/api/tasks/"+t2+"/cancel", "X/ops", &e); code != 200 {
		t.Fatalf("*/ops cancelling a T2 task: %d (%s), want 200", code, e.Error)
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

// tenantFixture is a console with tenant admins, whose tokens are
// "tenant/subject" (owner "iss|subject|tenant").
func tenantFixture(t *testing.T, admins ...string) *fixture {
	t.Helper()
	parsed, err := console.ParseAdmins(admins, true)
	if err != nil {
		t.Fatal(err)
	}
	return newFixture(t, console.Config{
		Admins: parsed,
		Authenticate: func(r *http.Request) (console.Identity, error) {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			tenant, sub, _ := strings.Cut(tok, "/")
			return console.Identity{Subject: sub, Tenant: tenant, Owner: "iss|" + sub + "|" + tenant}, nil
		},
	})
}
