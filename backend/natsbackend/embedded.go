package natsbackend

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpqueue/mcpqueue/internal/loopback"
)

// EmbeddedNKeyFile is the file in the data dir (--data-dir) holding the
// seed of the user nkey the all-in-one api's embedded NATS accepts.
const EmbeddedNKeyFile = "nats.nk"

// embeddedKey is the seed file of the all-in-one api's embedded NATS that a
// process reaching NATS with no credentials of its own authenticates with:
// <data-dir>/nats.nk, if it exists and every URL of o.URL is on
// loopback, where that api listens by default ("" otherwise).
func (o *Options) embeddedKey() string {
	a := o.Auth
	if o.DataDir == "" || a.Creds != "" || a.NKey != "" || a.User != "" || a.Token != "" || o.URL == "" {
		return ""
	}
	for _, s := range strings.Split(o.URL, ",") {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		u, err := url.Parse(s)
		if err != nil || u.User != nil || !loopback.Host(u.Hostname()) {
			return ""
		}
	}
	p := filepath.Join(o.DataDir, EmbeddedNKeyFile)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return p
}
