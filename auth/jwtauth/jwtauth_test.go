package jwtauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/auth/authtest"
	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
)

const audience = "https://mcp.example.com/mcp"

func newClock() *authtest.Clock {
	return authtest.NewClock(time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC))
}

func newAuth(t *testing.T, cfg jwtauth.Config) *jwtauth.Authenticator {
	t.Helper()
	a, err := jwtauth.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// front answers the way mcpfront does with an Authenticator: 401, or 403
// for missing scopes, with the challenge; 200 with the owner otherwise.
func front(a *jwtauth.Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			status := http.StatusUnauthorized
			if errors.Is(err, auth.ErrInsufficientScope) {
				status = http.StatusForbidden
			} else if !errors.Is(err, auth.ErrUnauthenticated) {
				status = http.StatusInternalServerError // neither sentinel: a bug
			}
			w.Header().Set("WWW-Authenticate", a.Challenge(r, err))
			http.Error(w, err.Error(), status)
			return
		}
		_, _ = fmt.Fprint(w, p.Owner())
	})
}

func request(t *testing.T, a *jwtauth.Authenticator, token string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://mcp.example.com/mcp", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	front(a).ServeHTTP(rec, req)
	return rec.Result(), strings.TrimSpace(rec.Body.String())
}

// TestAuthCases runs the shared token table against the Authenticator for
// every JWKS algorithm, with and without required scopes.
func TestAuthCases(t *testing.T) {
	t.Parallel()
	for _, alg := range []string{jwtauth.RS256, jwtauth.ES256, jwtauth.EdDSA} {
		for _, scopes := range [][]string{nil, {"mcp:tools", "mcp:tasks"}} {
			t.Run(fmt.Sprintf("%s/scopes=%d", alg, len(scopes)), func(t *testing.T) {
				t.Parallel()
				iss := authtest.NewIssuer(t, alg)
				a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: iss.JWKSURL, Scopes: scopes})
				if want := "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"; a.MetadataURL() != want {
					t.Fatalf("metadata URL %q, want %q", a.MetadataURL(), want)
				}
				for _, c := range authtest.Cases(t, iss, audience, scopes) {
					req := httptest.NewRequest(http.MethodPost, "http://mcp.example.com/mcp", nil)
					c.Apply(req)
					rec := httptest.NewRecorder()
					front(a).ServeHTTP(rec, req)
					if err := c.Check(rec.Code, rec.Header(), a.MetadataURL(), scopes); err != nil {
						t.Errorf("%s: %v (body %q)", c.Name, err, rec.Body.String())
						continue
					}
					want := auth.Principal{Issuer: iss.URL, Subject: "case-subject"}.Owner()
					if c.Status == 200 && strings.TrimSpace(rec.Body.String()) != want {
						t.Errorf("%s: principal %q, want %q", c.Name, rec.Body.String(), want)
					}
				}
			})
		}
	}
}

// TestAuthRefusalsSayWhy checks the description of each refusal: the
// client sees why, and nothing of the token.
func TestAuthRefusalsSayWhy(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t, jwtauth.ES256)
	a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: iss.JWKSURL})
	now := time.Now()
	mint := func(edit func(jwt.MapClaims)) string {
		c := iss.Claims("alice", audience)
		edit(c)
		return iss.Mint(t, c)
	}
	for _, tc := range []struct {
		token, want string
	}{
		{mint(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() }), "the access token expired"},
		{mint(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() }), "the access token is not valid yet"},
		{mint(func(c jwt.MapClaims) { c["iat"] = now.Add(time.Hour).Unix() }), "the access token was issued in the future"},
		{mint(func(c jwt.MapClaims) { c["aud"] = []string{"https://a.example/mcp", "https://b.example/mcp"} }), "the access token is for another audience"},
		{mint(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), "the access token is from another issuer"},
		{mint(func(c jwt.MapClaims) { delete(c, "exp") }), "the access token lacks a required claim (iss, aud or exp)"},
		{authtest.None(t, iss.Claims("alice", audience)), "the signing algorithm is not accepted"},
		{authtest.HS256(t, iss.PublicKeyPEM(t), iss.Claims("alice", audience)), "the signing algorithm is not accepted"},
		{iss.MintForeign(t, iss.Claims("alice", audience)), "the access token signature is invalid"},
		{iss.MintUnknownKid(t, iss.Claims("alice", audience)), "no key of the issuer verifies the access token"},
		{"a.b.c", "the access token is malformed"},
	} {
		resp, body := request(t, a, tc.token)
		if resp.StatusCode != 401 || !strings.Contains(body, tc.want) {
			t.Errorf("got %d %q, want 401 %q", resp.StatusCode, body, tc.want)
		}
		_, params, err := authtest.ParseChallenge(resp.Header.Get("WWW-Authenticate"))
		if err != nil || params["error_description"] != tc.want {
			t.Errorf("challenge %q: error_description want %q (%v)", resp.Header.Get("WWW-Authenticate"), tc.want, err)
		}
		if strings.Contains(body, tc.token) {
			t.Errorf("the refusal repeats the token: %q", body)
		}
	}
	// An audience list containing ours is fine.
	tok := mint(func(c jwt.MapClaims) { c["aud"] = []string{"https://a.example/mcp", audience} })
	if resp, body := request(t, a, tok); resp.StatusCode != 200 {
		t.Errorf("aud list with ours: %d %s", resp.StatusCode, body)
	}
	// A critical header parameter we do not understand (RFC 7515 §4.1.11).
	crit := iss.MintWithHeader(t, iss.Claims("alice", audience), map[string]any{"crit": []string{"exp-ext"}, "exp-ext": 1})
	if resp, body := request(t, a, crit); resp.StatusCode != 401 || !strings.Contains(body, "critical") {
		t.Errorf("crit header: %d %s", resp.StatusCode, body)
	}
}

// TestAuthKeyRotation: a token under a new kid validates once the issuer
// rotates (one refetch); a withdrawn key stops validating; unknown kids
// trigger at most one fetch per interval, however many arrive at once.
func TestAuthKeyRotation(t *testing.T) {
	t.Parallel()
	clk := newClock()
	iss := authtest.NewIssuer(t, jwtauth.ES256)
	iss.Now = clk.Now
	const gap = 30 * time.Second
	a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: iss.JWKSURL, Now: clk.Now, JWKSMinInterval: gap, JWKSRefresh: time.Hour})

	wantStatus := func(what, token string, status int, fetches int64) {
		t.Helper()
		resp, body := request(t, a, token)
		if resp.StatusCode != status {
			t.Fatalf("%s: status %d (%s), want %d", what, resp.StatusCode, body, status)
		}
		if got := iss.Fetches(); got != fetches {
			t.Fatalf("%s: %d JWKS fetches, want %d", what, got, fetches)
		}
	}
	oldTok := iss.Mint(t, iss.Claims("alice", audience))
	wantStatus("first token", oldTok, 200, 1)
	wantStatus("cached", oldTok, 200, 1)

	// Rotation right away: the new kid is unknown, and the last fetch was
	// less than the interval ago, so it is refused without a fetch.
	iss.Rotate(t, true)
	newTok := iss.Mint(t, iss.Claims("alice", audience))
	wantStatus("new kid inside the interval", newTok, 401, 1)
	clk.Add(gap)
	wantStatus("new kid after the interval", newTok, 200, 2)
	wantStatus("old kid still published", oldTok, 200, 2)

	// Withdraw the old key: it keeps working from the cache until the
	// next fetch, which a new rotation triggers.
	clk.Add(gap)
	iss.Rotate(t, false)
	newest := iss.Mint(t, iss.Claims("alice", audience))
	wantStatus("old kid, cached", oldTok, 200, 2)
	wantStatus("newest kid", newest, 200, 3)
	wantStatus("old kid withdrawn", oldTok, 401, 3)
	wantStatus("previous kid withdrawn", newTok, 401, 3)

	// A burst of made-up kids: one fetch at most per interval.
	clk.Add(gap)
	var wg sync.WaitGroup
	for range 50 {
		tok := iss.MintUnknownKid(t, iss.Claims("mallory", audience))
		wg.Go(func() {
			if resp, _ := request(t, a, tok); resp.StatusCode != 401 {
				t.Errorf("unknown kid: status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if got := iss.Fetches(); got != 4 {
		t.Fatalf("50 unknown kids made %d fetches in total, want 4 (one for the burst)", got)
	}
	for range 20 {
		wantStatus("more unknown kids", iss.MintUnknownKid(t, iss.Claims("mallory", audience)), 401, 4)
	}
	wantStatus("known kid meanwhile", newest, 200, 4)
}

// TestAuthJWKSRefreshAndOutage: keys are refetched when old; if the issuer
// is down the cached keys stay in use, and fetches stay rate-limited.
func TestAuthJWKSRefreshAndOutage(t *testing.T) {
	t.Parallel()
	clk := newClock()
	iss := authtest.NewIssuer(t, jwtauth.EdDSA)
	iss.Now = clk.Now
	a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: iss.JWKSURL, Now: clk.Now, JWKSMinInterval: time.Minute, JWKSRefresh: 10 * time.Minute})
	if err := a.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if iss.Fetches() != 1 {
		t.Fatalf("Refresh made %d fetches", iss.Fetches())
	}
	tok := func() string { return iss.Mint(t, iss.Claims("alice", audience)) }
	if resp, body := request(t, a, tok()); resp.StatusCode != 200 || iss.Fetches() != 1 {
		t.Fatalf("warm cache: %d %s, %d fetches", resp.StatusCode, body, iss.Fetches())
	}
	clk.Add(10 * time.Minute)
	if resp, _ := request(t, a, tok()); resp.StatusCode != 200 || iss.Fetches() != 2 {
		t.Fatalf("stale cache: %d, %d fetches (want a refetch)", resp.StatusCode, iss.Fetches())
	}
	iss.SetDown(true)
	clk.Add(10 * time.Minute)
	for i := range 5 {
		if resp, body := request(t, a, tok()); resp.StatusCode != 200 {
			t.Fatalf("issuer down, request %d: %d %s (cached keys must stay in use)", i, resp.StatusCode, body)
		}
	}
	if iss.Fetches() != 3 {
		t.Fatalf("issuer down: %d fetches, want 3 (one failed attempt per interval)", iss.Fetches())
	}
	if err := a.Refresh(t.Context()); err == nil {
		t.Fatal("Refresh with the issuer down: no error")
	}
	iss.SetDown(false)
	clk.Add(time.Minute)
	if resp, _ := request(t, a, tok()); resp.StatusCode != 200 || iss.Fetches() != 5 {
		t.Fatalf("issuer back: %d, %d fetches, want 5", resp.StatusCode, iss.Fetches())
	}
}

// TestAuthJWKSUnreachable: no keys at all gives 401 invalid_token, and a
// fetch at most once per interval.
func TestAuthJWKSUnreachable(t *testing.T) {
	t.Parallel()
	clk := newClock()
	iss := authtest.NewIssuer(t, jwtauth.ES256)
	iss.Now = clk.Now
	iss.SetDown(true)
	a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: iss.JWKSURL, Now: clk.Now})
	for range 3 {
		resp, body := request(t, a, iss.Mint(t, iss.Claims("alice", audience)))
		if resp.StatusCode != 401 || !strings.Contains(body, "no key of the issuer") {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	if iss.Fetches() != 1 {
		t.Fatalf("%d fetches, want 1", iss.Fetches())
	}
}

func TestAuthHS256(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	iss := authtest.NewIssuer(t, jwtauth.RS256) // for claims and a wrong-family token
	a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, HS256Key: key})
	claims := iss.Claims("alice", audience)
	for _, tc := range []struct {
		name   string
		token  string
		status int
	}{
		{"HS256 with the key", authtest.HS256(t, key, claims), 200},
		{"HS256 with another key", authtest.HS256(t, []byte("another key of thirty-two bytes!"), claims), 401},
		{"RS256 from the issuer", iss.Mint(t, claims), 401},
		{"alg none", authtest.None(t, claims), 401},
	} {
		if resp, body := request(t, a, tc.token); resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.status)
		}
	}
	if _, err := jwtauth.New(&jwtauth.Config{Issuer: "x", Audience: audience, HS256Key: []byte("short")}); err == nil {
		t.Error("a 5-byte HS256 key was accepted")
	}
}

func TestAuthConfig(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte("k"), 32)
	for _, tc := range []struct {
		name string
		cfg  *jwtauth.Config
	}{
		{"nil", nil},
		{"no issuer", &jwtauth.Config{Audience: audience, HS256Key: key}},
		{"no audience", &jwtauth.Config{Issuer: "i", HS256Key: key}},
		{"no keys", &jwtauth.Config{Issuer: "i", Audience: audience}},
		{"both keys", &jwtauth.Config{Issuer: "i", Audience: audience, HS256Key: key, JWKSURL: "https://i.example/jwks"}},
		{"JWKS over plain http", &jwtauth.Config{Issuer: "i", Audience: audience, JWKSURL: "http://idp.example/jwks"}},
		{"HS256 with a JWKS", &jwtauth.Config{Issuer: "i", Audience: audience, JWKSURL: "https://i.example/jwks", Algorithms: []string{"HS256"}}},
		{"RS256 with a static key", &jwtauth.Config{Issuer: "i", Audience: audience, HS256Key: key, Algorithms: []string{"RS256"}}},
		{"none", &jwtauth.Config{Issuer: "i", Audience: audience, JWKSURL: "https://i.example/jwks", Algorithms: []string{"none"}}},
		{"bad scope", &jwtauth.Config{Issuer: "i", Audience: audience, HS256Key: key, Scopes: []string{`a"b`}}},
		{"relative audience", &jwtauth.Config{Issuer: "i", Audience: "/mcp", HS256Key: key}},
	} {
		if _, err := jwtauth.New(tc.cfg); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	for _, u := range []string{"http://127.0.0.1:9/jwks", "http://localhost/jwks", "http://[::1]:8/jwks", "https://idp.example/jwks"} {
		if _, err := jwtauth.New(&jwtauth.Config{Issuer: "i", Audience: audience, JWKSURL: u}); err != nil {
			t.Errorf("JWKS %s: %v", u, err)
		}
	}
}

// TestAuthAlgorithmsNarrow: a configured subset refuses the others.
func TestAuthAlgorithmsNarrow(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t, jwtauth.RS256)
	a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: iss.JWKSURL, Algorithms: []string{jwtauth.ES256}})
	if resp, body := request(t, a, iss.Mint(t, iss.Claims("alice", audience))); resp.StatusCode != 401 || !strings.Contains(body, "algorithm") {
		t.Fatalf("RS256 token with only ES256 accepted: %d %s", resp.StatusCode, body)
	}
	if iss.Fetches() != 0 {
		t.Fatalf("a refused algorithm still fetched the JWKS")
	}
}

func TestAuthTenantClaim(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t, jwtauth.ES256)
	a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: iss.JWKSURL, TenantClaim: "https://example.com/tenant"})
	mint := func(tenant any) string {
		c := iss.Claims("alice", audience)
		if tenant != nil {
			c["https://example.com/tenant"] = tenant
		}
		return iss.Mint(t, c)
	}
	resp, body := request(t, a, mint("acme"))
	if want := (auth.Principal{Issuer: iss.URL, Subject: "alice", Tenant: "acme"}).Owner(); resp.StatusCode != 200 || body != want {
		t.Fatalf("tenant acme: %d %q, want owner %q", resp.StatusCode, body, want)
	}
	// A tenant holding the owner key's separator is escaped, not refused:
	// it cannot spell another principal's key.
	resp, body = request(t, a, mint("acme|x"))
	if want := (auth.Principal{Issuer: iss.URL, Subject: "alice", Tenant: "acme|x"}).Owner(); resp.StatusCode != 200 || body != want || !strings.HasSuffix(body, "|alice|acme%7Cx") {
		t.Fatalf("tenant acme|x: %d %q, want owner %q", resp.StatusCode, body, want)
	}
	for _, bad := range []any{nil, "", 42, []string{"acme"}} {
		if resp, body := request(t, a, mint(bad)); resp.StatusCode != 401 || !strings.Contains(body, "tenant") {
			t.Errorf("tenant %v: %d %s", bad, resp.StatusCode, body)
		}
	}
}

func TestAuthScopes(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t, jwtauth.EdDSA)
	a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: iss.JWKSURL, Scopes: []string{"mcp:tools", "mcp:tasks"}})
	mint := func(edit func(jwt.MapClaims)) string {
		c := iss.Claims("alice", audience)
		edit(c)
		return iss.Mint(t, c)
	}
	for _, tc := range []struct {
		name   string
		token  string
		status int
		detail string
	}{
		{"scope string", mint(func(c jwt.MapClaims) { c["scope"] = "openid mcp:tasks mcp:tools" }), 200, ""},
		{"scp array", mint(func(c jwt.MapClaims) { c["scp"] = []string{"mcp:tools", "mcp:tasks"} }), 200, ""},
		{"split across both", mint(func(c jwt.MapClaims) { c["scope"] = "mcp:tools"; c["scp"] = "mcp:tasks" }), 200, ""},
		{"one missing", mint(func(c jwt.MapClaims) { c["scope"] = "mcp:tools" }), 403, "lacks the scope mcp:tasks"},
		{"prefix is not a scope", mint(func(c jwt.MapClaims) { c["scope"] = "mcp:tools mcp:tasks2" }), 403, "lacks the scope mcp:tasks"},
		{"none", mint(func(jwt.MapClaims) {}), 403, "lacks the scope mcp:tools mcp:tasks"},
	} {
		resp, body := request(t, a, tc.token)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.detail) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, body, tc.status, tc.detail)
		}
		if tc.status == 403 {
			_, p, _ := authtest.ParseChallenge(resp.Header.Get("WWW-Authenticate"))
			if p["error"] != "insufficient_scope" || p["scope"] != "mcp:tools mcp:tasks" {
				t.Errorf("%s: challenge %q", tc.name, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
}

// TestAuthJWKSKeys: keys this package must not use are skipped, the others
// are found by kid (or alone without one).
func TestAuthJWKSKeys(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t, jwtauth.RS256)
	good := iss.Mint(t, iss.Claims("alice", audience))
	var pub map[string]any
	{
		resp, err := http.Get(iss.JWKSURL)
		if err != nil {
			t.Fatal(err)
		}
		var set struct {
			Keys []map[string]any `json:"keys"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		pub = set.Keys[0]
	}
	with := func(edit func(map[string]any)) map[string]any {
		k := map[string]any{}
		for n, v := range pub {
			k[n] = v
		}
		edit(k)
		return k
	}
	for _, tc := range []struct {
		name string
		keys []map[string]any
		ok   bool
	}{
		{"as published", []map[string]any{pub}, true},
		{"key without kid, token with kid", []map[string]any{with(func(k map[string]any) { delete(k, "kid") })}, false},
		{"encryption key", []map[string]any{with(func(k map[string]any) { k["use"] = "enc" })}, false},
		{"key restricted to another alg", []map[string]any{with(func(k map[string]any) { k["alg"] = "RS512" })}, false},
		{"key_ops without verify", []map[string]any{with(func(k map[string]any) { k["key_ops"] = []string{"encrypt"} })}, false},
		{"short modulus", []map[string]any{with(func(k map[string]any) { k["n"] = "AQAB" })}, false},
		{"junk beside it", []map[string]any{{"kty": "oct", "k": "c2VjcmV0", "kid": pub["kid"]}, {"kty": "EC", "crv": "P-521"}, pub}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"keys": tc.keys})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
			defer srv.Close()
			a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: srv.URL})
			resp, msg := request(t, a, good)
			if (resp.StatusCode == 200) != tc.ok {
				t.Fatalf("status %d (%s), want accepted=%v", resp.StatusCode, msg, tc.ok)
			}
		})
	}
	// A token without kid uses the only key of its algorithm, and is
	// refused when several could be meant.
	noKid := iss.MintWithHeader(t, iss.Claims("alice", audience), map[string]any{"kid": nil})
	a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: iss.JWKSURL})
	if resp, body := request(t, a, noKid); resp.StatusCode != 200 {
		t.Fatalf("token without kid, one key: %d %s", resp.StatusCode, body)
	}
	iss.Rotate(t, true)
	a = newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: iss.JWKSURL})
	if resp, body := request(t, a, noKid); resp.StatusCode != 401 {
		t.Fatalf("token without kid, two keys: %d %s", resp.StatusCode, body)
	}
}

// TestAuthMetadata: the resource metadata names the audience, the issuer
// and the scopes, and tokens only in the header.
func TestAuthMetadata(t *testing.T) {
	t.Parallel()
	a := newAuth(t, jwtauth.Config{Issuer: "https://idp.example", Audience: audience, HS256Key: bytes.Repeat([]byte("k"), 32), Scopes: []string{"mcp:tools"}})
	got, err := json.Marshal(a.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://idp.example"],"scopes_supported":["mcp:tools"],"bearer_methods_supported":["header"]}`
	if string(got) != want {
		t.Fatalf("metadata %s, want %s", got, want)
	}
}

// TestAuthFetchSurvivesCancelledRequest: the request that triggers a fetch
// may go away; the fetch (which others wait on) still completes.
func TestAuthFetchSurvivesCancelledRequest(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t, jwtauth.ES256)
	a := newAuth(t, jwtauth.Config{Issuer: iss.URL, Audience: audience, JWKSURL: iss.JWKSURL})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://mcp.example.com/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+iss.Mint(t, iss.Claims("alice", audience)))
	if _, err := a.Authenticate(req); err != nil {
		t.Fatalf("cancelled request: %v", err)
	}
}
