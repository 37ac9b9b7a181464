package bridge

// Upstream auth for the task gateway (issue #33): OAuth 2.0 client
// credentials, the token fetched before the first request, refreshed
// before it expires and again when the server answers 401; and the task
// owner's identity forwarded in a header the operator names.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuth is an upstream's OAuth 2.0 client-credentials grant: the bridge
// asks TokenURL for an access token and sends it as a bearer token.
type OAuth struct {
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scopes       []string
}

// check reports what is missing.
func (o *OAuth) check() error {
	switch {
	case o.TokenURL == "":
		return errors.New(`oauth: "tokenUrl" is required`)
	case o.ClientID == "":
		return errors.New(`oauth: "clientId" is required`)
	}
	if err := CheckURL(o.TokenURL); err != nil {
		return fmt.Errorf("oauth: tokenUrl: %w", err)
	}
	return nil
}

// refreshEarly is how long before its expiry a token is replaced.
const refreshEarly = 30 * time.Second

// oauthTransport adds the grant's bearer token to every request, one
// token shared by all the server's sessions.
type oauthTransport struct {
	cfg  clientcredentials.Config
	base http.RoundTripper

	mu  sync.Mutex
	tok *oauth2.Token
}

func newOAuthTransport(o *OAuth, base http.RoundTripper) *oauthTransport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &oauthTransport{base: base, cfg: clientcredentials.Config{
		TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes}}
}

// token is the current token, fetched anew when there is none, it expires
// within refreshEarly, or stale (the server refused it) is the one held.
func (o *oauthTransport) token(ctx context.Context, stale *oauth2.Token) (*oauth2.Token, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tok != nil && o.tok != stale && (o.tok.Expiry.IsZero() || time.Until(o.tok.Expiry) > refreshEarly) {
		return o.tok, nil
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Transport: o.base, Timeout: 30 * time.Second})
	tok, err := o.cfg.Token(ctx)
	if err != nil {
		// The error names the token endpoint and its answer, never the
		// secret (it is sent, not quoted).
		return nil, fmt.Errorf("oauth token from %s: %w", redactURL(o.cfg.TokenURL), err)
	}
	o.tok = tok
	return tok, nil
}

// RoundTrip sends req with the bearer token; a 401 is retried once with a
// fresh token.
func (o *oauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := o.token(req.Context(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := o.base.RoundTrip(withBearer(req, tok))
	if err != nil || resp.StatusCode != http.StatusUnauthorized || (req.Body != nil && req.GetBody == nil) {
		return resp, err
	}
	_ = resp.Body.Close()
	if tok, err = o.token(req.Context(), tok); err != nil {
		return nil, err
	}
	retry := withBearer(req, tok)
	if req.GetBody != nil {
		if retry.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return o.base.RoundTrip(retry)
}

func withBearer(req *http.Request, tok *oauth2.Token) *http.Request {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return r
}

// client is the HTTP client of the server's sessions: h.Client, with the
// OAuth grant's token added when h.OAuth is set.
func (h HTTPServer) client() *http.Client {
	c := h.Client
	if c == nil {
		c = &http.Client{}
	}
	if h.OAuth == nil {
		return c
	}
	cc := *c
	cc.Transport = newOAuthTransport(h.OAuth, c.Transport)
	return &cc
}
