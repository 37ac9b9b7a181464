package auth

import (
	"errors"
	"strings"
)

// Error is a refused request. Code is the OAuth error code of the challenge
// (RFC 6750 §3.1: invalid_request, invalid_token, insufficient_scope), empty
// when the request carried no bearer token at all; Description is safe to
// show the client; Err, when set, is the underlying cause, for logs only.
// It matches ErrUnauthenticated, or ErrInsufficientScope, with errors.Is.
type Error struct {
	Code        string
	Description string
	Err         error
}

// OAuth error codes.
const (
	CodeInvalidRequest    = "invalid_request"
	CodeInvalidToken      = "invalid_token"
	CodeInsufficientScope = "insufficient_scope"
)

func (e *Error) Error() string { return "auth: " + e.Description }

func (e *Error) Unwrap() []error {
	sentinel := ErrUnauthenticated
	if e.Code == CodeInsufficientScope {
		sentinel = ErrInsufficientScope
	}
	if e.Err == nil {
		return []error{sentinel}
	}
	return []error{sentinel, e.Err}
}

// Challenge is the WWW-Authenticate value of a refusal (RFC 6750 §3, RFC
// 9728 §5.1): a Bearer challenge with the error code and description when
// err is an *Error with a code, the scopes a token needs (if any), and
// where the protected resource metadata is.
func Challenge(err error, scopes []string, metadataURL string) string {
	var params []string
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		params = append(params, `error="`+e.Code+`"`, `error_description="`+quotable(e.Description)+`"`)
	}
	if len(scopes) > 0 {
		params = append(params, `scope="`+strings.Join(scopes, " ")+`"`)
	}
	params = append(params, `resource_metadata="`+metadataURL+`"`)
	return "Bearer " + strings.Join(params, ", ")
}

// quotable keeps the characters RFC 6750 allows in error_description.
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == 0x20 || r == 0x21 || r >= 0x23 && r <= 0x5B || r >= 0x5D && r <= 0x7E {
			return r
		}
		return -1
	}, s)
}
