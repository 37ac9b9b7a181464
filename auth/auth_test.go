package auth_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcpqueue/mcpqueue/auth"
)

// TestOwnerKeyUnambiguous: claim sets that used to share an owner key (the
// parts were joined by "|" unescaped) now get different ones, and keys of
// principals without "%" or "|" are what they were.
func TestOwnerKeyUnambiguous(t *testing.T) {
	t.Parallel()
	const iss = "https://issuer.example"
	ps := []auth.Principal{
		{Issuer: iss, Subject: "alice", Tenant: "t1"},
		{Issuer: iss, Subject: "alice|t1"},
		{Issuer: iss, Subject: "alice%7Ct1"},
		{Issuer: iss, Subject: "alice%7Ct1", Tenant: ""},
		{Issuer: iss + "|alice", Subject: "t1"},
		{Issuer: iss, Subject: "alice|t1", Tenant: "t2"},
		{Issuer: iss, Subject: "alice", Tenant: "t1|t2"},
		{Issuer: iss, Subject: "alice", Tenant: "t1%7Ct2"},
		{Issuer: iss, Subject: "alice"},
		{Issuer: iss, Subject: "alice%"},
		{Issuer: iss, Subject: "alice%25"},
	}
	seen := map[string]auth.Principal{}
	for _, p := range ps {
		k := p.Owner()
		if q, dup := seen[k]; dup && q != p {
			t.Errorf("%+v and %+v share the owner key %q", p, q, k)
		}
		seen[k] = p
	}
	if got, want := (auth.Principal{Issuer: iss, Subject: "alice", Tenant: "t1"}).Owner(), iss+"|alice|t1"; got != want {
		t.Errorf("owner key of a plain principal: %q, want %q (unchanged from before the escaping)", got, want)
	}
	if got := (auth.Principal{Issuer: iss, Subject: "alice|t1"}).Owner(); got != iss+"|alice%7Ct1" {
		t.Errorf("owner key of subject alice|t1: %q", got)
	}
	if got := (auth.Principal{Issuer: iss}).Owner(); got != "" {
		t.Errorf("owner key without a subject: %q, want none", got)
	}
}

// TestTenantKey: principals of one tenant share its key whatever their
// subjects; the same tenant name of another issuer, a tenant spelled like
// a subject, and principals without a tenant each get another.
func TestTenantKey(t *testing.T) {
	t.Parallel()
	const iss = "https://issuer.example"
	key := func(p auth.Principal) string { return auth.TenantKey(p.Owner()) }
	t1 := key(auth.Principal{Issuer: iss, Subject: "alice", Tenant: "t1"})
	if t1 == "" || key(auth.Principal{Issuer: iss, Subject: "bob|x", Tenant: "t1"}) != t1 {
		t.Errorf("alice and bob of t1: tenant keys %q and %q, want one", t1, key(auth.Principal{Issuer: iss, Subject: "bob|x", Tenant: "t1"}))
	}
	others := map[string]auth.Principal{t1: {Issuer: iss, Subject: "alice", Tenant: "t1"}}
	for _, p := range []auth.Principal{
		{Issuer: iss + "2", Subject: "alice", Tenant: "t1"},
		{Issuer: iss, Subject: "alice", Tenant: "t1|t2"},
		{Issuer: iss, Subject: "alice", Tenant: "t2"},
		{Issuer: iss, Subject: "t1"},
	} {
		k := key(p)
		if q, dup := others[k]; dup {
			t.Errorf("%+v and %+v share the tenant key %q", p, q, k)
		}
		others[k] = p
	}
	for _, owner := range []string{"", (auth.Principal{Issuer: iss, Subject: "alice"}).Owner(), (auth.Principal{Issuer: iss, Subject: "alice|t1"}).Owner()} {
		if k := auth.TenantKey(owner); k != "" {
			t.Errorf("tenant key of %q (no tenant): %q, want the one tenant of those without, \"\"", owner, k)
		}
	}
}

// TestErrorAndChallenge: a refusal matches the sentinel its code calls
// for, keeps its cause for errors.Is, and becomes the Bearer challenge.
func TestErrorAndChallenge(t *testing.T) {
	t.Parallel()
	cause := errors.New("signature mismatch")
	const md = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct {
		err      error
		scopes   []string
		sentinel error
		want     string
	}{
		{&auth.Error{Description: "no bearer access token"}, nil, auth.ErrUnauthenticated,
			`Bearer resource_metadata="` + md + `"`},
		{&auth.Error{Code: auth.CodeInvalidToken, Description: `the "token" is\bad`, Err: cause}, []string{"a", "b"}, auth.ErrUnauthenticated,
			`Bearer error="invalid_token", error_description="the token isbad", scope="a b", resource_metadata="` + md + `"`},
		{&auth.Error{Code: auth.CodeInsufficientScope, Description: "lacks b"}, []string{"b"}, auth.ErrInsufficientScope,
			`Bearer error="insufficient_scope", error_description="lacks b", scope="b", resource_metadata="` + md + `"`},
		{errors.New("some other failure"), nil, nil, `Bearer resource_metadata="` + md + `"`},
	} {
		if tc.sentinel != nil && !errors.Is(tc.err, tc.sentinel) {
			t.Errorf("%v does not match %v", tc.err, tc.sentinel)
		}
		if e := (*auth.Error)(nil); errors.As(tc.err, &e) && e.Err != nil && !errors.Is(tc.err, e.Err) {
			t.Errorf("%v lost its cause", tc.err)
		}
		if got := auth.Challenge(tc.err, tc.scopes, md); got != tc.want {
			t.Errorf("Challenge(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	if errors.Is(&auth.Error{Code: auth.CodeInsufficientScope}, auth.ErrUnauthenticated) {
		t.Error("a scope refusal matches ErrUnauthenticated: it would answer 401, not 403")
	}
}

func TestMetadataURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://mcp.example.com/mcp":       "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
		"https://mcp.example.com":           "https://mcp.example.com/.well-known/oauth-protected-resource",
		"https://mcp.example.com/":          "https://mcp.example.com/.well-known/oauth-protected-resource",
		"http://127.0.0.1:8080/tenant/mcp/": "http://127.0.0.1:8080/.well-known/oauth-protected-resource/tenant/mcp",
	} {
		if got, err := auth.MetadataURL(in); err != nil || got != want {
			t.Errorf("MetadataURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"/mcp", "ftp://x/mcp", "https://x/mcp#frag", "::"} {
		if _, err := auth.MetadataURL(bad); err == nil {
			t.Errorf("MetadataURL(%q): no error", bad)
		}
	}
}

func TestMetadataHandler(t *testing.T) {
	t.Parallel()
	h := auth.MetadataHandler(auth.Metadata{Resource: "https://mcp.example.com/mcp", BearerMethodsSupported: []string{"header"}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, auth.WellKnownPath+"/mcp", nil))
	if want := `{"resource":"https://mcp.example.com/mcp","bearer_methods_supported":["header"]}`; rec.Code != 200 || rec.Body.String() != want || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET: %d %s %q, want 200 application/json %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), want)
	}
	if rec.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Error("no CORS header: browser clients cannot read the metadata")
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, auth.WellKnownPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
}
