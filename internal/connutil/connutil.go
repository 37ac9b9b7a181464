// Package connutil holds what the connectors (backend/natsbackend,
// backend/redisbackend) and the binaries' flags (internal/cli) share: client
// TLS from PEM files, comma-separated lists, URLs with their password masked.
package connutil

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// TLSConfig builds the client TLS configuration of the flags <prefix>-ca,
// -cert and -key (nil when none is set); pkg prefixes the errors.
func TLSConfig(pkg, prefix, ca, cert, key string) (*tls.Config, error) {
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %s-ca: %w", pkg, prefix, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s-ca %s holds no PEM certificate", pkg, prefix, ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%s: %s-cert and %s-key go together (the client certificate and its private key)", pkg, prefix, prefix)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s: %s-cert %s, %s-key %s: %w", pkg, prefix, cert, prefix, key, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// SplitList splits a comma-separated value, dropping blanks.
func SplitList(s string) []string { return Split(s, ",") }

// Split splits s at sep, trimming each part and dropping blanks.
func Split(s, sep string) []string {
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// urlPassword is the password of user:password@ in a URL.
var urlPassword = regexp.MustCompile(`(://[^:/@\s,]*:)[^@/\s,]+@`)

// Redact is s with the password of every URL in it masked.
func Redact(s string) string {
	return urlPassword.ReplaceAllString(s, "${1}****@")
}
