// Package authtest is a test OAuth issuer and the token cases every test of
// the resource server runs. The issuer serves its JWKS from an httptest
// server on 127.0.0.1, mints signed access tokens, rotates its keys and
// counts JWKS fetches. Cases lists the tokens (valid, expired, not yet valid,
// wrong audience, wrong issuer, alg none, bad signature, token in the query
// string, missing token, …) with the status and challenge each must get, so
// the same table runs against the Authenticator, the in-process front end
// and the real api binary. It is used only by tests.
package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWKSPath is where the issuer serves its key set.
const JWKSPath = "/jwks.json"

// Issuer is a test authorization server: its identifier is its loopback URL.
type Issuer struct {
	// URL is the issuer identifier (iss) and the base of JWKSURL.
	URL     string
	JWKSURL string
	// Now is the clock of minted tokens (default time.Now).
	Now func() time.Time

	alg     string
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []*signingKey // published, oldest first
	current *signingKey
	fetches atomic.Int64
	down    atomic.Bool
}

// Clock is a fake clock tests move by hand: its Now serves as Issuer.Now
// and as the clock of the server under test.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock that reads t until it is moved.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type signingKey struct {
	kid    string
	method jwt.SigningMethod
	priv   crypto.Signer
}

// NewIssuer starts an issuer signing with alg (RS256, ES256 or EdDSA) and
// one published key; it stops when the test ends.
func NewIssuer(t testing.TB, alg string) *Issuer {
	t.Helper()
	i := &Issuer{alg: alg, Now: time.Now}
	k, err := newKey(alg)
	if err != nil {
		t.Fatal(err)
	}
	i.keys, i.current = []*signingKey{k}, k
	i.srv = httptest.NewServer(http.HandlerFunc(i.serveJWKS))
	t.Cleanup(i.srv.Close)
	i.URL = i.srv.URL
	i.JWKSURL = i.srv.URL + JWKSPath
	return i
}

func newKey(alg string) (*signingKey, error) {
	k := &signingKey{kid: rand.Text()[:12]}
	var err error
	switch alg {
	case "RS256":
		k.method = jwt.SigningMethodRS256
		k.priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		k.method = jwt.SigningMethodES256
		k.priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		k.method = jwt.SigningMethodEdDSA
		_, k.priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		err = fmt.Errorf("authtest: unsupported algorithm %q", alg)
	}
	return k, err
}

func (i *Issuer) serveJWKS(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != JWKSPath {
		http.NotFound(w, r)
		return
	}
	i.fetches.Add(1)
	if i.down.Load() {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	i.mu.Lock()
	keys := make([]map[string]string, 0, len(i.keys))
	for _, k := range i.keys {
		keys = append(keys, jwkOf(k))
	}
	i.mu.Unlock()
	w.Header().Set("Content-Type", "application/jwk-set+json")
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys})
}

func jwkOf(k *signingKey) map[string]string {
	enc := base64.RawURLEncoding.EncodeToString
	m := map[string]string{"kid": k.kid, "use": "sig", "alg": k.method.Alg()}
	switch pub := k.priv.Public().(type) {
	case *rsa.PublicKey:
		m["kty"], m["n"], m["e"] = "RSA", enc(pub.N.Bytes()), enc(big.NewInt(int64(pub.E)).Bytes())
	case *ecdsa.PublicKey:
		b, _ := pub.Bytes() // 0x04 || x || y
		m["kty"], m["crv"], m["x"], m["y"] = "EC", "P-256", enc(b[1:33]), enc(b[33:])
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", enc(pub)
	}
	return m
}

// Fetches counts JWKS requests so far.
func (i *Issuer) Fetches() int64 { return i.fetches.Load() }

// SetDown makes the JWKS endpoint answer 503 (true) or serve again (false).
func (i *Issuer) SetDown(down bool) { i.down.Store(down) }

// Kid is the key id new tokens are signed under.
func (i *Issuer) Kid() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.current.kid
}

// Rotate publishes a new key and signs with it from now on; without keepOld
// the previous keys are withdrawn from the JWKS. It returns the new kid.
func (i *Issuer) Rotate(t testing.TB, keepOld bool) string {
	t.Helper()
	k, err := newKey(i.alg)
	if err != nil {
		t.Fatal(err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if !keepOld {
		i.keys = nil
	}
	i.keys = append(i.keys, k)
	i.current = k
	return k.kid
}

// Claims are valid claims for sub at audience: this issuer, issued now,
// expiring in an hour, with the scopes (space-separated in "scope").
func (i *Issuer) Claims(sub, audience string, scopes ...string) jwt.MapClaims {
	now := i.Now()
	c := jwt.MapClaims{
		"iss": i.URL, "sub": sub, "aud": audience,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"jti": rand.Text(),
	}
	if len(scopes) > 0 {
		c["scope"] = strings.Join(scopes, " ")
	}
	return c
}

// Mint signs claims with the current key, naming it in kid.
func (i *Issuer) Mint(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	i.mu.Lock()
	k := i.current
	i.mu.Unlock()
	return sign(t, k, k.kid, claims)
}

// MintWithHeader signs claims with the current key, with extra header
// parameters; a nil value removes one (e.g. "kid").
func (i *Issuer) MintWithHeader(t testing.TB, claims jwt.MapClaims, header map[string]any) string {
	t.Helper()
	i.mu.Lock()
	k := i.current
	i.mu.Unlock()
	tok := jwt.NewWithClaims(k.method, claims)
	tok.Header["kid"] = k.kid
	for n, v := range header {
		if v == nil {
			delete(tok.Header, n)
		} else {
			tok.Header[n] = v
		}
	}
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// MintForeign signs claims with a key the issuer never published, under
// the current kid: a forged token whose signature does not verify.
func (i *Issuer) MintForeign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	k, err := newKey(i.alg)
	if err != nil {
		t.Fatal(err)
	}
	return sign(t, k, i.Kid(), claims)
}

// MintUnknownKid signs claims with a fresh unpublished key under a fresh
// kid: the resource server must look the kid up, not find it, and refuse.
func (i *Issuer) MintUnknownKid(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	k, err := newKey(i.alg)
	if err != nil {
		t.Fatal(err)
	}
	return sign(t, k, k.kid, claims)
}

// PublicKeyPEM is the current public key as PEM: what an attacker signs an
// HS256 token with, hoping for algorithm confusion.
func (i *Issuer) PublicKeyPEM(t testing.TB) []byte {
	t.Helper()
	i.mu.Lock()
	pub := i.current.priv.Public()
	i.mu.Unlock()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func sign(t testing.TB, k *signingKey, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.method, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// HS256 signs claims with a shared key.
func HS256(t testing.TB, key []byte, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// None is an unsigned token (alg "none").
func None(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Tamper replaces the payload of a signed token, keeping its header and
// signature.
func Tamper(t testing.TB, token string, claims jwt.MapClaims) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("authtest: %q is not a JWS", token)
	}
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

// Case is one request's credentials and the answer they must get.
type Case struct {
	Name string
	// Authorization are the Authorization header values sent (none if empty).
	Authorization []string
	// Query is a raw query added to the URL.
	Query string
	// Status is the HTTP status: 200 for accepted credentials (send a request
	// that succeeds when authenticated), 401 or 403 otherwise.
	Status int
	// Error is the error code the challenge must carry; "" for none.
	Error string
}

// Apply puts the case's credentials on req.
func (c Case) Apply(req *http.Request) {
	for _, v := range c.Authorization {
		req.Header.Add("Authorization", v)
	}
	if c.Query != "" {
		if req.URL.RawQuery != "" {
			req.URL.RawQuery += "&"
		}
		req.URL.RawQuery += c.Query
	}
}

// Cases are the credentials a resource server configured for this issuer,
// audience and required scopes must tell apart. Valid tokens carry the
// scopes; with scopes there is also a token that lacks them (403).
func Cases(t testing.TB, iss *Issuer, audience string, scopes []string) []Case {
	t.Helper()
	claims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := iss.Claims("case-subject", audience, scopes...)
		if edit != nil {
			edit(c)
		}
		return c
	}
	now := iss.Now()
	valid := iss.Mint(t, claims(nil))
	bearer := func(tok string) []string { return []string{"Bearer " + tok} }
	// invalid is a token minted with edited claims that must be refused.
	invalid := func(name string, edit func(jwt.MapClaims)) Case {
		return Case{Name: name, Authorization: bearer(iss.Mint(t, claims(edit))), Status: 401, Error: "invalid_token"}
	}
	cases := []Case{
		{Name: "valid", Authorization: bearer(valid), Status: 200},
		{Name: "valid, lower-case scheme", Authorization: []string{"bearer " + valid}, Status: 200},
		invalid("expired", func(c jwt.MapClaims) {
			c["iat"], c["nbf"], c["exp"] = now.Add(-2*time.Hour).Unix(), now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
		}),
		invalid("not yet valid", func(c jwt.MapClaims) {
			c["nbf"], c["exp"] = now.Add(time.Hour).Unix(), now.Add(2*time.Hour).Unix()
		}),
		invalid("wrong audience", func(c jwt.MapClaims) {
			c["aud"] = "https://other.example/mcp"
		}),
		invalid("no audience", func(c jwt.MapClaims) {
			delete(c, "aud")
		}),
		invalid("wrong issuer", func(c jwt.MapClaims) {
			c["iss"] = "https://evil.example"
		}),
		invalid("no expiry", func(c jwt.MapClaims) {
			delete(c, "exp")
		}),
		invalid("no subject", func(c jwt.MapClaims) {
			delete(c, "sub")
		}),
		{Name: "alg none", Authorization: bearer(None(t, claims(nil))), Status: 401, Error: "invalid_token"},
		{Name: "bad signature", Authorization: bearer(iss.MintForeign(t, claims(nil))), Status: 401, Error: "invalid_token"},
		{Name: "tampered payload", Authorization: bearer(Tamper(t, valid, claims(func(c jwt.MapClaims) {
			c["sub"] = "someone-else"
		}))), Status: 401, Error: "invalid_token"},
		{Name: "HS256 signed with the public key", Authorization: bearer(HS256(t, iss.PublicKeyPEM(t), claims(nil))), Status: 401, Error: "invalid_token"},
		{Name: "unknown kid", Authorization: bearer(iss.MintUnknownKid(t, claims(nil))), Status: 401, Error: "invalid_token"},
		{Name: "malformed", Authorization: bearer("not-a.jwt"), Status: 401, Error: "invalid_token"},
		{Name: "token in the query string", Query: "access_token=" + valid, Status: 401, Error: "invalid_request"},
		{Name: "token in the query string and the header", Authorization: bearer(valid), Query: "access_token=" + valid, Status: 401, Error: "invalid_request"},
		{Name: "two Authorization headers", Authorization: []string{"Bearer " + valid, "Bearer " + valid}, Status: 401, Error: "invalid_request"},
		{Name: "missing token", Status: 401},
		{Name: "Basic credentials", Authorization: []string{"Basic " + base64.StdEncoding.EncodeToString([]byte("user:pass"))}, Status: 401},
	}
	if len(scopes) > 0 {
		cases = append(cases, Case{Name: "insufficient scope", Authorization: bearer(iss.Mint(t, claims(func(c jwt.MapClaims) {
			delete(c, "scope")
		}))), Status: 403, Error: "insufficient_scope"})
	}
	return cases
}

// Check compares an answer with the case: the status and, for a refusal,
// a Bearer challenge with the error code, the required scopes and the
// resource metadata URL.
func (c Case) Check(status int, header http.Header, metadataURL string, scopes []string) error {
	if status != c.Status {
		return fmt.Errorf("status %d, want %d", status, c.Status)
	}
	challenges := header.Values("WWW-Authenticate")
	if c.Status < 400 {
		if len(challenges) > 0 {
			return fmt.Errorf("accepted request with a challenge %q", challenges)
		}
		return nil
	}
	if len(challenges) != 1 {
		return fmt.Errorf("want one WWW-Authenticate header, got %q", challenges)
	}
	scheme, params, err := ParseChallenge(challenges[0])
	if err != nil {
		return err
	}
	var errs []error
	if scheme != "Bearer" {
		errs = append(errs, fmt.Errorf("scheme %q, want Bearer", scheme))
	}
	if got := params["error"]; got != c.Error {
		errs = append(errs, fmt.Errorf("error=%q, want %q", got, c.Error))
	}
	if _, ok := params["error_description"]; ok != (c.Error != "") {
		errs = append(errs, fmt.Errorf("error_description present: %v, want %v", ok, c.Error != ""))
	}
	if got := params["resource_metadata"]; got != metadataURL {
		errs = append(errs, fmt.Errorf("resource_metadata=%q, want %q", got, metadataURL))
	}
	if got, want := params["scope"], strings.Join(scopes, " "); got != want {
		errs = append(errs, fmt.Errorf("scope=%q, want %q", got, want))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("challenge %q: %w", challenges[0], err)
	}
	return nil
}

// ParseChallenge splits a challenge of auth-params with quoted values
// (`Bearer a="x", b="y"`, RFC 9110 §11.6.1) into its scheme and params.
func ParseChallenge(v string) (scheme string, params map[string]string, err error) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(v), " ")
	params = map[string]string{}
	rest = strings.TrimSpace(rest)
	for rest != "" {
		name, after, ok := strings.Cut(rest, "=")
		if !ok {
			return "", nil, fmt.Errorf("challenge %q: no '=' after %q", v, rest)
		}
		name = strings.ToLower(strings.TrimSpace(name))
		if !strings.HasPrefix(after, `"`) {
			return "", nil, fmt.Errorf("challenge %q: %s is not a quoted string", v, name)
		}
		var val strings.Builder
		i := 1
		for ; i < len(after) && after[i] != '"'; i++ {
			if after[i] == '\\' && i+1 < len(after) {
				i++
			}
			val.WriteByte(after[i])
		}
		if i >= len(after) {
			return "", nil, fmt.Errorf("challenge %q: unterminated quoted string", v)
		}
		if _, dup := params[name]; dup {
			return "", nil, fmt.Errorf("challenge %q: %s repeated", v, name)
		}
		params[name] = val.String()
		rest = strings.TrimSpace(after[i+1:])
		rest = strings.TrimSpace(strings.TrimPrefix(rest, ","))
	}
	return scheme, params, nil
}
