package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers (https://www.standardwebhooks.com).
const (
	HeaderID        = "webhook-id"        // the delivery's id: the same on every retry
	HeaderTimestamp = "webhook-timestamp" // unix seconds of this attempt
	HeaderSignature = "webhook-signature" // "v1,<base64 HMAC-SHA256>", space-separated
)

// secretPrefix starts a secret in the Standard Webhooks form.
const secretPrefix = "whsec_"

// ParseSecret reads a signing secret (the api's --webhook-secret): the
// Standard Webhooks form "whsec_<base64 of the key>", or any other string,
// whose bytes are the key. A key shorter than 16 bytes is refused.
func ParseSecret(s string) ([]byte, error) {
	key := []byte(s)
	if rest, ok := strings.CutPrefix(s, secretPrefix); ok {
		var err error
		if key, err = base64.StdEncoding.DecodeString(rest); err != nil {
			return nil, fmt.Errorf("webhook secret: the part after %s must be base64: %w", secretPrefix, err)
		}
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("webhook secret: %d bytes of key; use at least 16 (e.g. whsec_ and 24 random bytes in base64)", len(key))
	}
	return key, nil
}

// Sign returns the signature of one attempt, "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>", for the webhook-signature header.
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, ts.Unix())
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SetHeaders sets the three Standard Webhooks headers of one attempt on h.
func SetHeaders(h http.Header, key []byte, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, Sign(key, id, ts, body))
}

// ErrSignature is Verify's refusal of a request that was not signed with
// the key, or not within the tolerance of now.
var ErrSignature = errors.New("webhook: bad signature")

// DefaultTolerance is how far from now a receiver should accept a
// webhook-timestamp (replayed requests are older).
const DefaultTolerance = 5 * time.Minute

// Verify checks a received webhook as a receiver does: its timestamp is
// within tolerance of now (0: DefaultTolerance) and one of its
// signatures is key's over id.timestamp.body. It returns the webhook-id,
// by which a receiver drops a retry of a delivery it already has.
func Verify(key []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) (string, error) {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	id, tsText := h.Get(HeaderID), h.Get(HeaderTimestamp)
	if id == "" || tsText == "" {
		return "", fmt.Errorf("%w: missing %s or %s", ErrSignature, HeaderID, HeaderTimestamp)
	}
	secs, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: %s %q is not unix seconds", ErrSignature, HeaderTimestamp, tsText)
	}
	ts := time.Unix(secs, 0)
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return "", fmt.Errorf("%w: timestamp %s is more than %s from now", ErrSignature, ts.UTC().Format(time.RFC3339), tolerance)
	}
	want := Sign(key, id, ts, body)
	for sig := range strings.FieldsSeq(h.Get(HeaderSignature)) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return id, nil
		}
	}
	return "", fmt.Errorf("%w: no v1 signature matches", ErrSignature)
}
