package auth

import (
	"errors"
	"net/http"
	"strings"
)

// Authenticator checks the credentials of a request. The front end calls it
// first for every request; the principal it returns owns the tasks the
// request creates and is the only one who sees them.
type Authenticator interface {
	Authenticate(r *http.Request) (Principal, error)
}

// Challenger is an optional ability of an Authenticator: the
// WWW-Authenticate value for a refused request.
type Challenger interface {
	Challenge(r *http.Request, err error) string
}

// Errors an Authenticator returns, wrapped with detail: ErrUnauthenticated
// answers 401 with a WWW-Authenticate challenge pointing at the protected
// resource metadata; ErrInsufficientScope answers 403.
var (
	ErrUnauthenticated   = errors.New("auth: unauthenticated")
	ErrInsufficientScope = errors.New("auth: insufficient scope")
)

// Principal is who a request acts for.
type Principal struct {
	Issuer  string
	Subject string
	Tenant  string // optional, from a configured claim
}

// Owner is the owner key stored on tasks and sessions: issuer and subject,
// and the tenant when there is one, joined by "|". Each part has "%" and "|"
// escaped (as %25 and %7C), so no part can carry the separator and two
// different principals never share a key: a subject "alice|t1" is not
// subject "alice" in tenant "t1", whether or not a tenant claim is read.
// A part holding neither character is written as it is, so keys stored
// before the escaping (all but those of such principals) still match.
func (p Principal) Owner() string {
	if p.Subject == "" {
		return ""
	}
	o := escapeOwnerPart(p.Issuer) + "|" + escapeOwnerPart(p.Subject)
	if p.Tenant != "" {
		o += "|" + escapeOwnerPart(p.Tenant)
	}
	return o
}

// TenantKey is the key of the tenant an owner key names: its issuer and
// tenant (escaped as in the owner key), or "" for an owner key without a
// tenant, so every principal without a tenant claim falls in one tenant.
// Workers share their slots by it (consumer.Config.TenantShare).
func TenantKey(owner string) string {
	iss, rest, _ := strings.Cut(owner, "|")
	_, tenant, ok := strings.Cut(rest, "|")
	if !ok {
		return ""
	}
	return iss + "|" + tenant
}

var ownerEscaper = strings.NewReplacer("%", "%25", "|", "%7C")

func escapeOwnerPart(s string) string {
	if !strings.ContainsAny(s, "%|") {
		return s
	}
	return ownerEscaper.Replace(s)
}
