package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
)

const testSecret = "cl13nt-s3cret"

// tokenIssuer is an OAuth token endpoint (client credentials) and an
// upstream that accepts only the tokens it issued and has not revoked.
type tokenIssuer struct {
	mu        sync.Mutex
	issued    int
	expiresIn int // seconds
	valid     map[string]bool
	refused   int      // upstream requests answered 401
	users     []string // X-User of each upstream POST
	badClient int
}

func newTokenIssuer(t *testing.T, expiresIn int) (ti *tokenIssuer, tokenURL, mcpURL string) {
	t.Helper()
	ti = &tokenIssuer{expiresIn: expiresIn, valid: map[string]bool{}}
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		ti.mu.Lock()
		defer ti.mu.Unlock()
		if id != "gw-client" || secret != testSecret || r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != "mcp:call" {
			ti.badClient++
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		ti.issued++
		tok := fmt.Sprintf("access-%d", ti.issued)
		ti.valid[tok] = true
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": ti.expiresIn})
	}))
	t.Cleanup(tokens.Close)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestServer() }, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti.mu.Lock()
		ok := ti.valid[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			ti.refused++
		} else if r.Method == http.MethodPost {
			ti.users = append(ti.users, r.Header.Get("X-User"))
		}
		ti.mu.Unlock()
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	return ti, tokens.URL + "/token", up.URL + "/mcp"
}

func (ti *tokenIssuer) revokeAll() {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.valid = map[string]bool{}
}

func (ti *tokenIssuer) counts() (issued, refused, bad int) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return ti.issued, ti.refused, ti.badClient
}

func startOAuthRelay(t *testing.T, tokenURL, mcpURL string, log *redistest.SyncBuffer) *relayed {
	t.Helper()
	return relayHTTP(t, HTTPServer{URL: mcpURL, ForwardIdentity: "X-User",
		OAuth: &OAuth{TokenURL: tokenURL, ClientID: "gw-client", ClientSecret: testSecret, Scopes: []string{"mcp:call"}}}, 1, log)
}

func TestOAuthClientCredentialsAndIdentity(t *testing.T) {
	t.Parallel()
	ti, tokenURL, mcpURL := newTokenIssuer(t, 3600)
	log := &redistest.SyncBuffer{}
	x := startOAuthRelay(t, tokenURL, mcpURL, log)
	res, err := x.call(t, context.Background(), &fakeCall{owner: "alice@example.com"}, "echo", `{"text":"with a token"}`)
	if err != nil || !strings.Contains(string(res), "with a token") {
		t.Fatalf("echo: %s %v", res, err)
	}
	if issued, refused, bad := ti.counts(); issued != 1 || refused != 0 || bad != 0 {
		t.Fatalf("tokens issued %d, upstream refusals %d, bad clients %d: want one token, reused", issued, refused, bad)
	}
	ti.mu.Lock()
	last := ti.users[len(ti.users)-1]
	ti.mu.Unlock()
	if last != "alice@example.com" {
		t.Fatalf("X-User %q on the call, want the task owner", last)
	}

	// The upstream stops accepting the token: a 401, a new token, the call goes through.
	ti.revokeAll()
	if res, err = x.call(t, context.Background(), &fakeCall{owner: "bob"}, "echo", `{"text":"after a 401"}`); err != nil || !strings.Contains(string(res), "after a 401") {
		t.Fatalf("echo after the token was revoked: %s %v", res, err)
	}
	if issued, refused, _ := ti.counts(); issued != 2 || refused != 1 {
		t.Fatalf("tokens issued %d, refusals %d: want a second token after one 401", issued, refused)
	}
	_ = x.r.Close()
	if l := log.String(); strings.Contains(l, testSecret) || strings.Contains(l, "access-1") || strings.Contains(l, "access-2") {
		t.Fatalf("the log shows the client secret or a token:\n%s", l)
	}
}

func TestOAuthTokenRefreshedBeforeExpiry(t *testing.T) {
	t.Parallel()
	ti, tokenURL, mcpURL := newTokenIssuer(t, 5) // expires within refreshEarly: never reused
	x := startOAuthRelay(t, tokenURL, mcpURL, &redistest.SyncBuffer{})
	before, _, _ := ti.counts()
	if _, err := x.call(t, context.Background(), &fakeCall{}, "echo", `{"text":"fresh"}`); err != nil {
		t.Fatal(err)
	}
	if after, refused, _ := ti.counts(); after <= before || refused != 0 {
		t.Fatalf("tokens issued %d then %d, refusals %d: a token about to expire must be replaced before it is sent", before, after, refused)
	}
}

func TestOAuthBadClientNamesTheEndpoint(t *testing.T) {
	t.Parallel()
	_, tokenURL, mcpURL := newTokenIssuer(t, 3600)
	logger := zerolog.New(zerolog.NewTestWriter(t))
	h := HTTPServer{URL: mcpURL, OAuth: &OAuth{TokenURL: tokenURL, ClientID: "gw-client", ClientSecret: "wrong-secret", Scopes: []string{"mcp:call"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Serve(ctx, consumer.NewMux(), h.Dialer(logger), &Options{Logger: logger})
	if err == nil || !strings.Contains(err.Error(), "oauth token from "+tokenURL) || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("a refused client: %v, want the token endpoint's answer and no secret", err)
	}
}
