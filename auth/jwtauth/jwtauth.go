package jwtauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/internal/loopback"
	"github.com/mcpqueue/mcpqueue/internal/slogzero"
)

// Algorithms this package verifies.
const (
	RS256 = "RS256"
	ES256 = "ES256"
	EdDSA = "EdDSA"
	HS256 = "HS256"
)

// Defaults of the zero Config fields.
const (
	DefaultLeeway          = 30 * time.Second
	DefaultJWKSRefresh     = 15 * time.Minute
	DefaultJWKSMinInterval = 30 * time.Second
	DefaultJWKSTimeout     = 10 * time.Second
	// minHS256Key is the shortest static key accepted (RFC 7518 §3.2: at
	// least the hash size).
	minHS256Key = 32
	// maxTokenLen bounds the work an oversized header can cause.
	maxTokenLen = 16 << 10
)

var (
	jwksAlgorithms   = []string{RS256, ES256, EdDSA}
	staticAlgorithms = []string{HS256}
)

// Config says which tokens are accepted. Issuer, Audience and one of
// JWKSURL or HS256Key are required; every other zero field is a default.
type Config struct {
	// Issuer is the iss every token must carry: the authorization server's
	// issuer identifier.
	Issuer string
	// Audience is the aud every token must contain: the server's canonical
	// resource URI, e.g. https://mcp.example.com/mcp (RFC 8707).
	Audience string
	// JWKSURL is where the issuer publishes its public signing keys (RS256,
	// ES256, EdDSA). It must be https, or http on a loopback host.
	JWKSURL string
	// HS256Key is a shared secret of at least 32 bytes; tokens are then HS256
	// and nothing else. Exclusive with JWKSURL.
	HS256Key []byte
	// Algorithms narrows the accepted algorithms. Default: RS256, ES256 and
	// EdDSA with a JWKS; HS256 with a static key. It cannot widen them.
	Algorithms []string
	// Scopes a token must all carry (in "scope", space-separated, or "scp").
	// A token without them is refused with 403 insufficient_scope. Empty:
	// no scope is required.
	Scopes []string
	// TenantClaim names a claim that becomes Principal.Tenant. When set,
	// every token must carry it as a non-empty string (escaped in the owner
	// key, auth.Principal.Owner, like every other part).
	TenantClaim string
	// AuthorizationServers are listed in the resource metadata. Default: Issuer.
	AuthorizationServers []string
	// ResourceMetadataURL is where challenges point. Default:
	// MetadataURL(Audience), the RFC 9728 path-suffixed well-known URL.
	ResourceMetadataURL string
	// Leeway tolerates clock skew on exp, nbf and iat. Default 30s; negative: none.
	Leeway time.Duration
	// JWKSRefresh is how long fetched keys are used before a request fetches
	// them again. Default 15m. If that fetch fails the old keys stay in use.
	JWKSRefresh time.Duration
	// JWKSMinInterval is the least time between two JWKS fetches, so tokens
	// with made-up key ids cannot make the server hammer the issuer: a token
	// with an unknown kid triggers a fetch at most this often. Default 30s.
	JWKSMinInterval time.Duration
	// HTTPClient fetches the JWKS. Default: a client with a 10s timeout.
	HTTPClient *http.Client
	// Logger gets the authenticator's log lines (JWKS fetches); Slog, when
	// set, instead. Default: none.
	Logger zerolog.Logger
	Slog   *slog.Logger
	Now    func() time.Time
}

// Authenticator validates bearer tokens. It is safe for concurrent use.
type Authenticator struct {
	cfg         Config
	algs        []string
	parser      *jwt.Parser
	keys        *keySet // nil with a static key
	metadataURL string
	log         zerolog.Logger
}

var (
	_ auth.Authenticator = (*Authenticator)(nil)
	_ auth.Challenger    = (*Authenticator)(nil)
)

// New checks cfg and returns the Authenticator. It does no I/O: the JWKS is
// fetched on first use (or by Refresh).
func New(cfg *Config) (*Authenticator, error) {
	if cfg == nil {
		return nil, errors.New("jwtauth: no configuration: an issuer, an audience and a JWKS URL or HS256 key are required")
	}
	c := *cfg
	if c.Issuer == "" {
		return nil, errors.New("jwtauth: an issuer is required")
	}
	if c.Audience == "" {
		return nil, errors.New("jwtauth: an audience (the canonical resource URI) is required")
	}
	if (c.JWKSURL == "") == (len(c.HS256Key) == 0) {
		return nil, errors.New("jwtauth: exactly one of a JWKS URL and an HS256 key is required")
	}
	allowed := jwksAlgorithms
	if len(c.HS256Key) > 0 {
		allowed = staticAlgorithms
		if len(c.HS256Key) < minHS256Key {
			return nil, fmt.Errorf("jwtauth: the HS256 key has %d bytes; at least %d are required", len(c.HS256Key), minHS256Key)
		}
	}
	algs := allowed
	if len(c.Algorithms) > 0 {
		algs = nil
		for _, a := range c.Algorithms {
			if !slices.Contains(allowed, a) {
				return nil, fmt.Errorf("jwtauth: algorithm %q is not accepted here (accepted: %s)", a, strings.Join(allowed, ", "))
			}
			if !slices.Contains(algs, a) {
				algs = append(algs, a)
			}
		}
	}
	for _, s := range c.Scopes {
		if !validScope(s) {
			return nil, fmt.Errorf("jwtauth: %q is not a valid scope token", s)
		}
	}
	if c.Leeway == 0 {
		c.Leeway = DefaultLeeway
	}
	c.Leeway = max(c.Leeway, 0)
	if c.JWKSRefresh <= 0 {
		c.JWKSRefresh = DefaultJWKSRefresh
	}
	if c.JWKSMinInterval <= 0 {
		c.JWKSMinInterval = DefaultJWKSMinInterval
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: DefaultJWKSTimeout}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Logger, c.Slog = slogzero.Logger(c.Logger, c.Slog), nil
	if len(c.AuthorizationServers) == 0 {
		c.AuthorizationServers = []string{c.Issuer}
	}
	murl := c.ResourceMetadataURL
	if murl == "" {
		var err error
		if murl, err = auth.MetadataURL(c.Audience); err != nil {
			return nil, err
		}
	}
	if strings.ContainsAny(murl, "\"\\ \t\r\n") {
		return nil, fmt.Errorf("jwtauth: resource metadata URL %q cannot go in a challenge", murl)
	}
	a := &Authenticator{cfg: c, algs: algs, metadataURL: murl, log: c.Logger}
	if c.JWKSURL != "" {
		if err := checkJWKSURL(c.JWKSURL); err != nil {
			return nil, err
		}
		a.keys = &keySet{url: c.JWKSURL, client: c.HTTPClient, now: c.Now, refresh: c.JWKSRefresh, minGap: c.JWKSMinInterval, log: c.Logger}
	}
	a.parser = jwt.NewParser(
		jwt.WithValidMethods(algs),
		jwt.WithIssuer(c.Issuer),
		jwt.WithAudience(c.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(c.Leeway),
		jwt.WithTimeFunc(c.Now),
	)
	return a, nil
}

// checkJWKSURL refuses a JWKS URL that an attacker on the path could
// answer: keys travel over https, or stay on this machine.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("jwtauth: JWKS URL %q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if loopback.Host(u.Hostname()) {
			return nil
		}
	}
	return fmt.Errorf("jwtauth: JWKS URL %q must be https (http only on a loopback host)", raw)
}

// Refresh fetches the JWKS now, whatever the cache holds. Call it at start-up
// to find a wrong URL early; with a static key it does nothing.
func (a *Authenticator) Refresh(ctx context.Context) error {
	if a.keys == nil {
		return nil
	}
	return a.keys.fetchNow(ctx)
}

// MetadataURL returns where challenges point.
func (a *Authenticator) MetadataURL() string { return a.metadataURL }

func refuse(code, desc string, cause error) *auth.Error {
	return &auth.Error{Code: code, Description: desc, Err: cause}
}

// Authenticate implements auth.Authenticator.
func (a *Authenticator) Authenticate(r *http.Request) (auth.Principal, error) {
	p, err := a.authenticate(r)
	if err != nil {
		var e *auth.Error
		if errors.As(err, &e) && e.Err != nil {
			a.log.Debug().Err(e.Err).Str("remote", r.RemoteAddr).Str("refusal", e.Description).Msg("bearer token refused")
		}
	}
	return p, err
}

func (a *Authenticator) authenticate(r *http.Request) (auth.Principal, error) {
	// RFC 6750 §2.3 and OAuth 2.1: never from the query string, and a
	// request that tries is refused even if it also has a header (§2: one
	// method per request).
	if tokenInQuery(r.URL.RawQuery) {
		return auth.Principal{}, refuse(auth.CodeInvalidRequest, "access tokens are accepted only in the Authorization header", nil)
	}
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return auth.Principal{}, refuse("", "no bearer access token in the Authorization header", nil)
	}
	if len(values) > 1 {
		return auth.Principal{}, refuse(auth.CodeInvalidRequest, "more than one Authorization header", nil)
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return auth.Principal{}, refuse("", "no bearer access token in the Authorization header", nil)
	}
	token = strings.TrimSpace(token)
	switch {
	case token == "":
		return auth.Principal{}, refuse(auth.CodeInvalidRequest, "the bearer token is empty", nil)
	case len(token) > maxTokenLen:
		return auth.Principal{}, refuse(auth.CodeInvalidToken, "the access token is too long", nil)
	}

	claims := jwt.MapClaims{}
	tok, err := a.parser.ParseWithClaims(token, claims, a.keyFunc(r.Context()))
	if err != nil {
		return auth.Principal{}, a.tokenError(tok, err)
	}
	sub, _ := claims.GetSubject()
	if sub == "" {
		return auth.Principal{}, refuse(auth.CodeInvalidToken, "the access token has no subject", nil)
	}
	iss, _ := claims.GetIssuer()
	p := auth.Principal{Issuer: iss, Subject: sub}
	if a.cfg.TenantClaim != "" {
		t, ok := claims[a.cfg.TenantClaim].(string)
		if !ok || t == "" {
			return auth.Principal{}, refuse(auth.CodeInvalidToken, "the access token has no valid tenant claim", nil)
		}
		p.Tenant = t
	}
	if missing := a.missingScopes(claims); len(missing) > 0 {
		return auth.Principal{}, refuse(auth.CodeInsufficientScope, "the access token lacks the scope "+strings.Join(missing, " "), nil)
	}
	return p, nil
}

// tokenInQuery reports whether the query carries access_token (also when a
// malformed query hides it from the parser).
func tokenInQuery(raw string) bool {
	q, err := url.ParseQuery(raw)
	return q.Has("access_token") || err != nil && strings.Contains(raw, "access_token")
}

var errCrit = errors.New("the token has critical header parameters this server does not understand")

// keyFunc picks the verification key. The parser has already refused
// algorithms outside the pinned set, and each key is returned only for its
// own algorithm family, so an HS256 token can never be checked against an
// RSA public key.
func (a *Authenticator) keyFunc(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		if _, ok := t.Header["crit"]; ok {
			return nil, errCrit // RFC 7515 §4.1.11: we understand no extension
		}
		alg := t.Method.Alg()
		if a.keys == nil {
			if alg != HS256 {
				return nil, errNoKey
			}
			return a.cfg.HS256Key, nil
		}
		kid, _ := t.Header["kid"].(string)
		return a.keys.key(ctx, kid, alg)
	}
}

// tokenError turns a parse failure into a refusal with a fixed description.
func (a *Authenticator) tokenError(tok *jwt.Token, err error) *auth.Error {
	if errors.Is(err, jwt.ErrTokenMalformed) {
		return refuse(auth.CodeInvalidToken, "the access token is malformed", err)
	}
	if tok != nil {
		if alg, _ := tok.Header["alg"].(string); !slices.Contains(a.algs, alg) {
			return refuse(auth.CodeInvalidToken, "the signing algorithm is not accepted", err)
		}
	}
	for _, d := range tokenErrorDescs {
		if errors.Is(err, d.err) {
			return refuse(auth.CodeInvalidToken, d.desc, err)
		}
	}
	return refuse(auth.CodeInvalidToken, "the access token is invalid", err)
}

// tokenErrorDescs describes the parse failures tokenError knows, the first
// that matches winning.
var tokenErrorDescs = []struct {
	err  error
	desc string
}{
	{errCrit, "the access token has unsupported critical header parameters"},
	{errNoKey, "no key of the issuer verifies the access token"},
	{jwt.ErrTokenSignatureInvalid, "the access token signature is invalid"},
	{jwt.ErrTokenUnverifiable, "the access token cannot be verified"},
	{jwt.ErrTokenExpired, "the access token expired"},
	{jwt.ErrTokenNotValidYet, "the access token is not valid yet"},
	{jwt.ErrTokenUsedBeforeIssued, "the access token was issued in the future"},
	{jwt.ErrTokenInvalidIssuer, "the access token is from another issuer"},
	{jwt.ErrTokenInvalidAudience, "the access token is for another audience"},
	{jwt.ErrTokenRequiredClaimMissing, "the access token lacks a required claim (iss, aud or exp)"},
}

// missingScopes returns the configured scopes the token lacks. Scopes come
// from "scope" (a space-separated string, RFC 9068) or "scp" (an array or a
// string, as some issuers write them).
func (a *Authenticator) missingScopes(claims jwt.MapClaims) []string {
	if len(a.cfg.Scopes) == 0 {
		return nil
	}
	have := map[string]bool{}
	add := func(v any) {
		switch v := v.(type) {
		case string:
			for _, s := range strings.Fields(v) {
				have[s] = true
			}
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					have[s] = true
				}
			}
		}
	}
	add(claims["scope"])
	add(claims["scp"])
	var missing []string
	for _, s := range a.cfg.Scopes {
		if !have[s] {
			missing = append(missing, s)
		}
	}
	return missing
}

// Challenge implements auth.Challenger: the Bearer challenge of a refusal,
// with the required scopes and the resource metadata URL.
func (a *Authenticator) Challenge(_ *http.Request, err error) string {
	return auth.Challenge(err, a.cfg.Scopes, a.metadataURL)
}

// Metadata returns the resource metadata for this configuration: the
// audience is the resource, tokens travel only in the header.
func (a *Authenticator) Metadata() auth.Metadata {
	return auth.Metadata{
		Resource:               a.cfg.Audience,
		AuthorizationServers:   a.cfg.AuthorizationServers,
		ScopesSupported:        a.cfg.Scopes,
		BearerMethodsSupported: []string{"header"},
	}
}

// validScope reports whether s is a scope-token (RFC 6749 §3.3).
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == 0x21 || r >= 0x23 && r <= 0x5B || r >= 0x5D && r <= 0x7E) {
			return false
		}
	}
	return true
}
