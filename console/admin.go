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
//
// An admin of a tenant sees and cancels that tenant's tasks only; an admin
// named "*/subject" (EveryTenant) is a global operator: that subject, in
// whichever tenant its token names, sees every tenant's tasks. Without
// tenants every admin sees every task.
type Admin struct {
	// Owner, when set, must equal the caller's owner key exactly.
	Owner string
	// Otherwise the caller's subject and tenant must both match; Tenant is
	// "" when the api reads no tenant claim.
	Tenant, Subject string
	// EveryTenant admits Subject in any tenant, and lets it see every
	// tenant's tasks ("*/subject").
	EveryTenant bool
}

// Admits reports whether id is this admin.
func (a Admin) Admits(id Identity) bool {
	if id.Subject == "" {
		return false
	}
	switch {
	case a.Owner != "":
		return id.Owner == a.Owner
	case a.EveryTenant:
		return id.Subject == a.Subject
	}
	return id.Subject == a.Subject && id.Tenant == a.Tenant
}

func (a Admin) String() string {
	switch {
	case a.Owner != "":
		return a.Owner
	case a.EveryTenant:
		return "*/" + a.Subject
	case a.Tenant != "":
		return a.Tenant + "/" + a.Subject
	}
	return a.Subject
}

// Admit reports whether one of admins admits id, and whether it may see
// every tenant's tasks (a "*/subject" admin, or any admin when id has no
// tenant) rather than those of its own tenant only.
func Admit(admins []Admin, id Identity) (ok, everyTenant bool) {
	for _, a := range admins {
		if a.Admits(id) {
			ok = true
			everyTenant = everyTenant || a.EveryTenant || id.Tenant == ""
		}
	}
	return ok, everyTenant
}

// sameTenant reports whether two owner keys (issuer|subject|tenant, each
// part escaped so that it holds no "|") name the same issuer and tenant.
// A key without a tenant part is in no tenant.
func sameTenant(a, b string) bool {
	pa, pb := strings.Split(a, "|"), strings.Split(b, "|")
	return len(pa) == 3 && len(pb) == 3 && pa[0] == pb[0] && pa[2] == pb[2]
}

// ParseAdmins reads the --console-admins entries. An entry holding "|" is an
// owner key, matched exactly (the key the api stores on tasks: issuer,
// subject and tenant, each with "%" and "|" escaped). Otherwise, with
// tenants (the api reads a tenant claim), an entry is "tenant/subject",
// split at the first "/"; a bare subject is refused, since it would match
// that subject in every tenant; "*/subject" names a global operator (that
// subject in every tenant, seeing every tenant's tasks) on purpose.
// Without tenants an entry is a subject ("*/subject" is that subject).
func ParseAdmins(entries []string, tenants bool) ([]Admin, error) {
	out := make([]Admin, 0, len(entries))
	for _, e := range entries {
		switch tenant, sub, ok := strings.Cut(e, "/"); {
		case e == "":
			continue
		case strings.Contains(e, "|"):
			out = append(out, Admin{Owner: e})
		case ok && tenant == "*" && sub != "":
			out = append(out, Admin{Subject: sub, EveryTenant: true})
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
