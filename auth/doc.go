// Package auth says who a request acts for, with the standard library only:
// the Authenticator the front end calls for every request, the Principal it
// returns (whose Owner key is stored on tasks and sessions), the errors of a
// refusal (ErrUnauthenticated answers 401, ErrInsufficientScope 403), the
// Bearer challenge of WWW-Authenticate (RFC 6750) and the protected
// resource metadata it points at (RFC 9728).
//
// Validating tokens is an implementation's job: package
// github.com/mcpqueue/mcpqueue/auth/jwtauth checks JWT access tokens against
// an issuer's keys. Package mcpfront imports this one, never the other way.
package auth
