package console

import (
	"fmt"
	"strings"
)

// Identity is who a console API request comes from, as the api's
// authenticator saw it: the token's subject, the tenant (when the api reads a
// tenant claim) and the owner key stored on that principal's tasks.
type Identity struct {
	Subject string
	Tenant  string
	Owner   string
}

// String names the caller in messages ("cancelled from the console by …").
func (id Identity) String() string {
	if id.Tenant != "" {
		return id.Tenant + "/" + id.Subject
	}
	return id.Subject
}

// Admin is one console admin. A subject is unique only within its tenant
// (and issuer), so an admin is named by the whole principal: by owner key,
// or by tenant and subject. Subject alone is allowed only when the api reads
// no tenant claim.
type Admin struct {
	// Owner, when set, must equal the caller's owner key exactly.
	Owner string
	// Otherwise the caller's subject and tenant must both match; Tenant is
	// "" when the api reads no tenant claim.
	Tenant, Subject string
}

// Admits reports whether id is this admin.
func (a Admin) Admits(id Identity) bool {
	if id.Subject == "" {
		return false
	}
	if a.Owner != "" {
		return id.Owner == a.Owner
	}
	return id.Subject == a.Subject && id.Tenant == a.Tenant
}

func (a Admin) String() string {
	switch {
	case a.Owner != "":
		return a.Owner
	case a.Tenant != "":
		return a.Tenant + "/" + a.Subject
	}
	return a.Subject
}

// ParseAdmins reads the --console-admins entries. An entry holding "|" is an
// owner key, matched exactly (the key the api stores on tasks: issuer,
// subject and tenant, each with "%" and "|" escaped). Otherwise, with
// tenants (the api reads a tenant claim), an entry is "tenant/subject",
// split at the first "/"; a bare subject is refused, since it would match
// that subject in every tenant. Without tenants an entry is a subject.
func ParseAdmins(entries []string, tenants bool) ([]Admin, error) {
	out := make([]Admin, 0, len(entries))
	for _, e := range entries {
		switch tenant, sub, ok := strings.Cut(e, "/"); {
		case e == "":
			continue
		case strings.Contains(e, "|"):
			out = append(out, Admin{Owner: e})
		case !tenants:
			out = append(out, Admin{Subject: e})
		case !ok || tenant == "" || sub == "":
			return nil, fmt.Errorf("console: admin %q: with a tenant claim, name an admin as tenant/subject (or by owner key): a subject is unique only within its tenant", e)
		default:
			out = append(out, Admin{Tenant: tenant, Subject: sub})
		}
	}
	return out, nil
}
