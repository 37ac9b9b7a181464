package main

import (
	"strings"
	"testing"
)

// The webhook flags go together: an allow list needs a secret, a secret
// needs an allow list, and bad values name their flag.
func TestWebhookFlagsCheck(t *testing.T) {
	for _, c := range []struct {
		allow, secret, err string
	}{
		{"", "", ""},
		{"127.0.0.1, hooks.example.com", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", ""},
		{"127.0.0.1", "", "--webhook-allow needs --webhook-secret"},
		{"", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "--webhook-secret needs --webhook-allow"},
		{"127.0.0.1", "short", "--webhook-secret: "},
		{"http://x/", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "--webhook-allow: "},
	} {
		h := webhookFlags{allow: c.allow, secret: c.secret}
		err := h.check()
		switch {
		case c.err == "" && err != nil:
			t.Errorf("allow %q secret %q: %v", c.allow, c.secret, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("allow %q secret %q: %v, want an error with %q", c.allow, c.secret, err, c.err)
		case c.err == "" && (h.list == nil) != (c.allow == ""):
			t.Errorf("allow %q: webhooks on = %v", c.allow, h.list != nil)
		}
	}
}
