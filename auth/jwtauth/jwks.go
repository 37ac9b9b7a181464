package jwtauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

const (
	maxJWKSBytes = 1 << 20
	minRSABits   = 2048
)

var errNoKey = errors.New("no verification key for the token")

// publicKey is one usable key of a JWK set.
type publicKey struct {
	kid string
	alg string // the JWK's "alg", "" when unrestricted
	key any    // *rsa.PublicKey, *ecdsa.PublicKey (P-256) or ed25519.PublicKey
}

// verifies reports whether k may check a signature made with alg: each
// algorithm has exactly one key type, so no key serves two families.
func (k *publicKey) verifies(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch key := k.key.(type) {
	case *rsa.PublicKey:
		return alg == RS256
	case *ecdsa.PublicKey:
		return alg == ES256 && key.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return alg == EdDSA
	}
	return false
}

// keySet is the cached JWKS of the issuer. Keys are fetched on first use,
// again once they are older than refresh, and when a token names a key id
// the set lacks (rotation) — but never more often than once per minGap, so
// tokens with made-up key ids cannot turn the server into a load generator
// against the issuer. One fetch runs at a time; concurrent requests wait
// for it. A failed fetch keeps the keys already known.
type keySet struct {
	url     string
	client  *http.Client
	now     func() time.Time
	refresh time.Duration
	minGap  time.Duration
	log     zerolog.Logger

	mu        sync.Mutex
	keys      []publicKey
	fetchedAt time.Time     // last successful fetch
	triedAt   time.Time     // last fetch started
	lastErr   error         // outcome of the last fetch
	inflight  chan struct{} // closed when the running fetch ends
}

// key returns the key that verifies a token signed with alg under kid.
func (s *keySet) key(ctx context.Context, kid, alg string) (any, error) {
	fetched := false
	for {
		s.mu.Lock()
		waited, err := s.awaitFetch(ctx)
		if err != nil {
			return nil, err
		}
		if waited {
			fetched = true // someone else's fetch counts as ours
			continue
		}
		k, found := s.find(kid, alg)
		now := s.now()
		fresh := !s.fetchedAt.IsZero() && now.Sub(s.fetchedAt) < s.refresh
		mayFetch := !fetched && (s.triedAt.IsZero() || now.Sub(s.triedAt) >= s.minGap)
		if found && fresh || !mayFetch {
			lastErr := s.lastErr
			s.mu.Unlock()
			switch {
			case found:
				return k, nil
			case lastErr != nil:
				return nil, fmt.Errorf("%w (kid %q, %s); the last JWKS fetch failed: %w", errNoKey, kid, alg, lastErr)
			}
			return nil, fmt.Errorf("%w (kid %q, %s)", errNoKey, kid, alg)
		}
		s.startFetch(ctx)
		fetched = true
	}
}

// find looks a key up; without a kid, the only key for alg is used. The
// caller holds mu.
func (s *keySet) find(kid, alg string) (any, bool) {
	var match *publicKey
	n := 0
	for i := range s.keys {
		k := &s.keys[i]
		if k.kid != kid && kid != "" || !k.verifies(alg) {
			continue
		}
		if match == nil {
			match = k
		}
		n++
	}
	if match == nil || kid == "" && n > 1 {
		return nil, false
	}
	return match.key, true
}

// fetchNow fetches the set whatever the cache holds (or waits for the fetch
// already running).
func (s *keySet) fetchNow(ctx context.Context) error {
	s.mu.Lock()
	waited, err := s.awaitFetch(ctx)
	if err != nil {
		return err
	}
	if !waited {
		s.startFetch(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// awaitFetch waits for the fetch already running, if there is one. It is
// called with mu held; when a fetch was running it releases mu and reports
// true (with ctx's error if the wait was cut short), else it keeps mu.
func (s *keySet) awaitFetch(ctx context.Context) (bool, error) {
	ch := s.inflight
	if ch == nil {
		return false, nil
	}
	s.mu.Unlock()
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// startFetch runs one fetch; it is called with mu held, which it releases.
// The fetch outlives a cancelled request (other requests wait on it) but
// not the client's timeout.
func (s *keySet) startFetch(ctx context.Context) {
	ch := make(chan struct{})
	s.inflight = ch
	s.triedAt = s.now()
	s.mu.Unlock()

	keys, err := s.fetch(context.WithoutCancel(ctx))

	s.mu.Lock()
	if err == nil {
		s.keys, s.fetchedAt = keys, s.now()
		s.log.Debug().Str("jwks", s.url).Int("keys", len(keys)).Msg("JWKS fetched")
	} else {
		s.log.Warn().Err(err).Str("jwks", s.url).Int("keys_kept", len(s.keys)).Msg("JWKS fetch failed")
	}
	s.lastErr = err
	s.inflight = nil
	close(ch)
	s.mu.Unlock()
}

// fetch reads and parses the JWK set. Keys this package cannot use (other
// types, curves, encryption keys, short RSA moduli) are skipped.
func (s *keySet) fetch(ctx context.Context) ([]publicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("jwtauth: JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("jwtauth: fetching the JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwtauth: fetching the JWKS: HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("jwtauth: reading the JWKS: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("jwtauth: the JWKS exceeds %d bytes", maxJWKSBytes)
	}
	return parseJWKS(body, s.log)
}

type jwk struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	Alg    string   `json:"alg"`
	KeyOps []string `json:"key_ops"`
	Crv    string   `json:"crv"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
}

// parseJWKS parses a JWK set (RFC 7517 §5).
func parseJWKS(body []byte, log zerolog.Logger) ([]publicKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("jwtauth: the JWKS is not JSON: %w", err)
	}
	if set.Keys == nil {
		return nil, errors.New(`jwtauth: the JWKS has no "keys" member`)
	}
	out := make([]publicKey, 0, len(set.Keys))
	for _, raw := range set.Keys {
		var j jwk
		if err := json.Unmarshal(raw, &j); err != nil {
			log.Debug().Err(err).Msg("JWKS: skipping an unreadable key")
			continue
		}
		k, err := j.publicKey()
		if err != nil {
			log.Debug().Err(err).Str("kid", j.Kid).Str("kty", j.Kty).Msg("JWKS: skipping a key")
			continue
		}
		out = append(out, k)
	}
	return out, nil
}

func (j *jwk) publicKey() (publicKey, error) {
	if j.Use != "" && j.Use != "sig" {
		return publicKey{}, fmt.Errorf("use %q is not sig", j.Use)
	}
	if len(j.KeyOps) > 0 && !slices.Contains(j.KeyOps, "verify") {
		return publicKey{}, errors.New("key_ops lacks verify")
	}
	k := publicKey{kid: j.Kid, alg: j.Alg}
	switch j.Kty {
	case "RSA":
		n, err := b64(j.N)
		if err != nil || len(n) == 0 {
			return k, errors.New("bad RSA modulus")
		}
		e, err := b64(j.E)
		if err != nil || len(e) == 0 || len(e) > 4 {
			return k, errors.New("bad RSA exponent")
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < minRSABits {
			return k, fmt.Errorf("RSA modulus of %d bits is too short", pub.N.BitLen())
		}
		if pub.E < 3 || pub.E%2 == 0 {
			return k, errors.New("bad RSA exponent")
		}
		k.key = pub
	case "EC":
		if j.Crv != "P-256" {
			return k, fmt.Errorf("curve %q is not supported", j.Crv)
		}
		x, errX := b64(j.X)
		y, errY := b64(j.Y)
		if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
			return k, errors.New("bad P-256 coordinates")
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return k, err
		}
		k.key = pub
	case "OKP":
		if j.Crv != "Ed25519" {
			return k, fmt.Errorf("curve %q is not supported", j.Crv)
		}
		x, err := b64(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return k, errors.New("bad Ed25519 key")
		}
		k.key = ed25519.PublicKey(x)
	default:
		return k, fmt.Errorf("key type %q is not supported", j.Kty)
	}
	for _, alg := range jwksAlgorithms {
		if k.verifies(alg) {
			return k, nil
		}
	}
	return k, fmt.Errorf("alg %q does not fit the key", j.Alg)
}

func b64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
