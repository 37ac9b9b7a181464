package mcpfront

import (
	"context"
	"errors"
	"net/http"

	"github.com/mcpqueue/mcpqueue/auth"
)

type principalKey struct{}

// principalOf is the principal Authenticate found for this request.
func principalOf(ctx context.Context) auth.Principal {
	p, _ := ctx.Value(principalKey{}).(auth.Principal)
	return p
}

// authenticate runs the configured Authenticator; on refusal it writes the
// answer and reports false.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if s.cfg.Auth == nil {
		return r, true
	}
	p, err := s.cfg.Auth.Authenticate(r)
	if err == nil {
		return r.WithContext(context.WithValue(r.Context(), principalKey{}, p)), true
	}
	status := http.StatusUnauthorized
	if errors.Is(err, auth.ErrInsufficientScope) {
		status = http.StatusForbidden
	}
	if ch, ok := s.cfg.Auth.(auth.Challenger); ok {
		if v := ch.Challenge(r, err); v != "" {
			w.Header().Set("WWW-Authenticate", v)
		}
	}
	s.log.Info().Str("remote", r.RemoteAddr).Int("status", status).Err(err).Msg("request refused by authentication")
	writeError(w, nil, errorf(codeInvalidRequest, status, http.StatusText(status)+": "+err.Error()))
	return r, false
}
