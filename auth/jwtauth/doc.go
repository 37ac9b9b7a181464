// Package jwtauth makes the MCP endpoint an OAuth 2.1 resource server. It
// validates bearer access tokens (JWTs), taken only from the Authorization
// header, against the signing keys of one issuer: a JWKS fetched from a URL
// (cached, fetched again on key rotation, rate-limited) or a static HS256
// key. The accepted algorithms are pinned: RS256, ES256 and EdDSA with a
// JWKS, HS256 only with a static key, never "none". A token must carry the
// configured iss, the server's canonical resource URI in aud, an exp in the
// future, no nbf in the future, a sub, and the configured scopes.
//
// *Authenticator is an auth.Authenticator and auth.Challenger: a refused
// request gets 401 (403 for missing scopes) with a WWW-Authenticate
// challenge whose resource_metadata points at the protected resource
// metadata (RFC 9728) that auth.MetadataHandler serves from Metadata.
//
// The package is named jwtauth, not jwt, so that code using it and
// github.com/golang-jwt/jwt together needs no import alias.
package jwtauth
