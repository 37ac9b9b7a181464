package natsbackend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/mcpqueue/mcpqueue/internal/connutil"
)

// Auth is how a process authenticates to NATS and secures the
// connection (docs/security.md, "Connecting to a secured broker"). At most
// one of Creds, NKey, User (with Password) and Token; a URL may carry
// user:password@ or token@ itself. TLS is on for tls:// URLs, when the
// server requires it, or when any TLS field is set.
type Auth struct {
	Creds    string // credentials file: user JWT and nkey seed (nsc, NATS operator mode)
	NKey     string // file holding an nkey seed (SU…)
	User     string
	Password string
	Token    string
	TLSCA    string // PEM file of the CAs that sign the server's certificate; default the system's
	TLSCert  string // client certificate (PEM), for servers that verify clients
	TLSKey   string // its private key (PEM)
}

// options turns a into connection options, reading every file now so that
// a missing or malformed one is reported by its flag before connecting.
func (a *Auth) options() ([]nats.Option, error) {
	var methods []string
	for flag, v := range map[string]string{"--nats-creds": a.Creds, "--nats-nkey": a.NKey, "--nats-user": a.User, "--nats-token": a.Token} {
		if v != "" {
			methods = append(methods, flag)
		}
	}
	if len(methods) > 1 {
		slices.Sort(methods)
		return nil, fmt.Errorf("natsbackend: %s exclude each other: authenticate one way", strings.Join(methods, " and "))
	}
	if a.Password != "" && a.User == "" {
		return nil, errors.New("natsbackend: --nats-password needs --nats-user")
	}
	var opts []nats.Option
	switch {
	case a.Creds != "":
		raw, err := os.ReadFile(a.Creds)
		if err != nil {
			return nil, fmt.Errorf("natsbackend: --nats-creds: %w", err)
		}
		tok, err := nkeys.ParseDecoratedJWT(raw)
		if err == nil {
			_, err = jwt.DecodeUserClaims(tok)
		}
		if err != nil {
			return nil, fmt.Errorf("natsbackend: --nats-creds %s holds no user JWT: %w", a.Creds, err)
		}
		if _, err := nkeys.ParseDecoratedNKey(raw); err != nil {
			return nil, fmt.Errorf("natsbackend: --nats-creds %s holds no nkey seed: %w", a.Creds, err)
		}
		opts = append(opts, nats.UserCredentials(a.Creds))
	case a.NKey != "":
		o, err := nats.NkeyOptionFromSeed(a.NKey)
		if err != nil {
			return nil, fmt.Errorf("natsbackend: --nats-nkey %s: %w", a.NKey, err)
		}
		opts = append(opts, o)
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	case a.Token != "":
		opts = append(opts, nats.Token(a.Token))
	}
	tc, err := connutil.TLSConfig("natsbackend", "--nats-tls", a.TLSCA, a.TLSCert, a.TLSKey)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, nats.Secure(tc))
	}
	return opts, nil
}

// connect connects to o.URL with the options and waits until the
// connection is up. A server that is not there yet is retried until ctx
// ends; one that refuses the credentials or whose TLS handshake fails ends
// the wait at once with an error saying which flags to check.
//
// With no credentials of its own, a process reaching NATS on loopback uses
// the all-in-one api's key in the data dir if there is one (embeddedKey); a
// server that takes no nkeys is then joined without it.
func (o *Options) connect(ctx context.Context, name string) (*nats.Conn, error) {
	log := o.Logger
	auth := o.Auth
	found := o.embeddedKey()
	if found != "" {
		auth.NKey = found
		log.Info().Str("key", found).Msg("no NATS credentials given: using the all-in-one api's key in --data-dir")
	}
	nc, err := o.dial(ctx, name, auth, found)
	if found != "" && errors.Is(err, nats.ErrNkeysNotSupported) {
		log.Info().Str("key", found).Msg("this NATS takes no nkeys (it is not the all-in-one api's): joining without credentials")
		return o.dial(ctx, name, o.Auth, "")
	}
	return nc, err
}

// dial connects with auth; found is the data dir key it holds, if any,
// for the error hints.
func (o *Options) dial(ctx context.Context, name string, auth Auth, found string) (*nats.Conn, error) {
	log := o.Logger
	sec, err := auth.options()
	if err != nil {
		return nil, err
	}
	errc := make(chan error, 16)
	nc, err := nats.Connect(o.URL, append(sec,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if c.IsClosed() {
				return // our own Close or Drain: no reconnecting
			}
			log.Warn().Err(err).Msg("NATS disconnected; reconnecting")
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info().Str("url", c.ConnectedUrl()).Msg("NATS reconnected")
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			select {
			case errc <- err:
			default:
			}
		}),
	)...)
	if err != nil {
		return nil, fmt.Errorf("natsbackend: connect NATS %s: %w", o.URL, err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for !nc.IsConnected() {
		select {
		case err := <-errc:
			last = err
			if hint := refusal(err, found, o.DataDir); hint != "" {
				nc.Close()
				return nil, fmt.Errorf("natsbackend: NATS %s refused the connection: %w (%s)", o.URL, err, hint)
			}
		case <-tick.C:
		case <-ctx.Done():
			nc.Close()
			if last == nil {
				last = ctx.Err()
			}
			return nil, fmt.Errorf("natsbackend: cannot connect to NATS %s: %w", o.URL, last)
		}
	}
	return nc, nil
}

// refusal says which flags to check when err is one that retrying cannot
// cure ("" otherwise). found is the data dir's key the connection used, if
// any; dataDir is --data-dir.
func refusal(err error, found, dataDir string) string {
	msg := err.Error()
	switch {
	case errors.Is(err, nats.ErrNkeysNotSupported):
		return "this server takes no nkeys: check --nats-nkey"
	case found != "" && strings.Contains(strings.ToLower(msg), "authorization violation"):
		return "used the key " + found + ": it belongs to the all-in-one api started with --data-dir " + dataDir + " (this NATS is another one, or that api made a new key); check --data-dir, or pass --nats-nkey, --nats-creds, --nats-user and --nats-password, or --nats-token"
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked),
		errors.Is(err, nats.ErrAccountAuthExpired), strings.Contains(strings.ToLower(msg), "authorization violation"):
		return "check --nats-creds, --nats-nkey, --nats-user and --nats-password, or --nats-token; the all-in-one api's NATS takes the key in its --data-dir: --nats-nkey <data-dir>/" + EmbeddedNKeyFile
	case errors.Is(err, nats.ErrTLS), strings.Contains(msg, "x509: "), strings.Contains(msg, "tls: "), errors.Is(err, nats.ErrSecureConnWanted), errors.Is(err, nats.ErrSecureConnRequired):
		return "check the TLS settings: --nats-tls-ca (the CA that signed the server's certificate), --nats-tls-cert and --nats-tls-key (the client certificate a verifying server wants), a tls:// URL"
	}
	return ""
}
