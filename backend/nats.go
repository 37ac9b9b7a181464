package backend

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"
)

// NATSAuth is how a process authenticates to NATS and secures the
// connection (docs/security.md, "Connecting to a secured broker"). At most
// one of Creds, NKey, User (with Password) and Token; a URL may carry
// user:password@ or token@ itself. TLS is on for tls:// URLs, when the
// server requires it, or when any TLS field is set.
type NATSAuth struct {
	Creds    string // credentials file: user JWT and nkey seed (nsc, NATS operator mode)
	NKey     string // file holding an nkey seed (SU…)
	User     string
	Password string
	Token    string
	TLSCA    string // PEM file of the CAs that sign the server's certificate; default the system's
	TLSCert  string // client certificate (PEM), for servers that verify clients
	TLSKey   string // its private key (PEM)
}

func (a *NATSAuth) flags(e *Env) {
	e.String(&a.Creds, "nats-creds", "MCPQ_NATS_CREDS", "", "nats backend: credentials file (user JWT and nkey seed, as nsc writes it) for a server in operator mode")
	e.String(&a.NKey, "nats-nkey", "MCPQ_NATS_NKEY", "", "nats backend: file holding an nkey seed (SU…) to authenticate with")
	e.String(&a.User, "nats-user", "MCPQ_NATS_USER", "", "nats backend: user name (with --nats-password)")
	e.String(&a.Password, "nats-password", "MCPQ_NATS_PASSWORD", "", "nats backend: password of --nats-user")
	e.String(&a.Token, "nats-token", "MCPQ_NATS_TOKEN", "", "nats backend: authentication token")
	e.String(&a.TLSCA, "nats-tls-ca", "MCPQ_NATS_TLS_CA", "", "nats backend: PEM file of the CA certificates that sign the server's certificate (default: the system's); turns TLS on")
	e.String(&a.TLSCert, "nats-tls-cert", "MCPQ_NATS_TLS_CERT", "", "nats backend: client certificate (PEM) for a server that verifies clients (with --nats-tls-key); turns TLS on")
	e.String(&a.TLSKey, "nats-tls-key", "MCPQ_NATS_TLS_KEY", "", "nats backend: private key (PEM) of --nats-tls-cert")
	e.Secret("nats-password", "nats-token")
}

// options turns a into connection options, reading every file now so that
// a missing or malformed one is reported by its flag before connecting.
func (a *NATSAuth) options() ([]nats.Option, error) {
	var methods []string
	for flag, v := range map[string]string{"--nats-creds": a.Creds, "--nats-nkey": a.NKey, "--nats-user": a.User, "--nats-token": a.Token} {
		if v != "" {
			methods = append(methods, flag)
		}
	}
	if len(methods) > 1 {
		slices.Sort(methods)
		return nil, fmt.Errorf("backend: %s exclude each other: authenticate one way", strings.Join(methods, " and "))
	}
	if a.Password != "" && a.User == "" {
		return nil, errors.New("backend: --nats-password needs --nats-user")
	}
	var opts []nats.Option
	switch {
	case a.Creds != "":
		raw, err := os.ReadFile(a.Creds)
		if err != nil {
			return nil, fmt.Errorf("backend: --nats-creds: %w", err)
		}
		tok, err := nkeys.ParseDecoratedJWT(raw)
		if err == nil {
			_, err = jwt.DecodeUserClaims(tok)
		}
		if err != nil {
			return nil, fmt.Errorf("backend: --nats-creds %s holds no user JWT: %w", a.Creds, err)
		}
		if _, err := nkeys.ParseDecoratedNKey(raw); err != nil {
			return nil, fmt.Errorf("backend: --nats-creds %s holds no nkey seed: %w", a.Creds, err)
		}
		opts = append(opts, nats.UserCredentials(a.Creds))
	case a.NKey != "":
		o, err := nats.NkeyOptionFromSeed(a.NKey)
		if err != nil {
			return nil, fmt.Errorf("backend: --nats-nkey %s: %w", a.NKey, err)
		}
		opts = append(opts, o)
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	case a.Token != "":
		opts = append(opts, nats.Token(a.Token))
	}
	tc, err := tlsConfig("--nats-tls", a.TLSCA, a.TLSCert, a.TLSKey)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, nats.Secure(tc))
	}
	return opts, nil
}

// tlsConfig builds the client TLS configuration of flags <prefix>-ca,
// -cert and -key (nil when none is set).
func tlsConfig(prefix, ca, cert, key string) (*tls.Config, error) {
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("backend: %s-ca: %w", prefix, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("backend: %s-ca %s holds no PEM certificate", prefix, ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("backend: %s-cert and %s-key go together (the client certificate and its private key)", prefix, prefix)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("backend: %s-cert %s, %s-key %s: %w", prefix, cert, prefix, key, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// connectNATS connects to url with the options and waits until the
// connection is up. A server that is not there yet is retried until ctx
// ends; one that refuses the credentials or whose TLS handshake fails ends
// the wait at once with an error saying which flags to check.
//
// With no credentials of its own, a process reaching NATS on loopback uses
// the all-in-one api's key in the data dir if there is one (embeddedKey); a
// server that takes no nkeys is then joined without it.
func (o *Options) connectNATS(ctx context.Context, name string, log zerolog.Logger) (*nats.Conn, error) {
	auth := o.NATSAuth
	found := o.embeddedKey()
	if found != "" {
		auth.NKey = found
		log.Info().Str("key", found).Msg("no NATS credentials given: using the all-in-one api's key in --data-dir")
	}
	nc, err := o.dialNATS(ctx, name, auth, found, log)
	if found != "" && errors.Is(err, nats.ErrNkeysNotSupported) {
		log.Info().Str("key", found).Msg("this NATS takes no nkeys (it is not the all-in-one api's): joining without credentials")
		return o.dialNATS(ctx, name, o.NATSAuth, "", log)
	}
	return nc, err
}

// dialNATS connects with auth; found is the data dir key it holds, if any,
// for the error hints.
func (o *Options) dialNATS(ctx context.Context, name string, auth NATSAuth, found string, log zerolog.Logger) (*nats.Conn, error) {
	sec, err := auth.options()
	if err != nil {
		return nil, err
	}
	errc := make(chan error, 16)
	nc, err := nats.Connect(o.NATSURL, append(sec,
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
		return nil, fmt.Errorf("backend: connect NATS %s: %w", o.NATSURL, err)
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
				return nil, fmt.Errorf("backend: NATS %s refused the connection: %w (%s)", o.NATSURL, err, hint)
			}
		case <-tick.C:
		case <-ctx.Done():
			nc.Close()
			if last == nil {
				last = ctx.Err()
			}
			return nil, fmt.Errorf("backend: cannot connect to NATS %s: %w", o.NATSURL, last)
		}
	}
	return nc, nil
}

// drainNATS drains nc and waits, at most 5 s, until the drain has closed
// it. nc.Drain returns at once; an all-in-one api shuts its embedded server
// down next, and a connection still draining then would be cut (and log a
// disconnect on a clean shutdown).
func drainNATS(nc *nats.Conn) {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		nc.Close()
	}
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
