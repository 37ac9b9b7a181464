package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/telemetry"
)

// lifecycle is how the api starts serving and how it stops, for a process
// behind a load balancer or a Kubernetes Service:
//
//   - --admin (the worker's flag, shared) serves /healthz, /readyz and
//     /metrics on a listener of its own; /metrics then leaves the public
//     --listen port, which keeps /healthz and /readyz for load balancers.
//   - On SIGTERM/SIGINT /readyz turns 503 at once ("shutting down") while
//     everything else is still served, so the balancer (or the endpoints
//     controller) stops sending before the listener closes. After
//     --shutdown-delay the public server drains: no new connections,
//     subscriptions/listen streams end with their result, in-flight requests
//     (inline calls waiting for a worker, tasks/result streams) get up to
//     --shutdown-timeout to finish. Those still waiting then end with a
//     JSON-RPC error saying the server is shutting down (mcpfront.ErrShuttingDown)
//     rather than a cut connection. On SIGINT (Ctrl-C at a terminal, where
//     no balancer is waiting) there is no delay: the drain starts at once.
type lifecycle struct {
	delay, timeout time.Duration
	draining       atomic.Bool
}

func (l *lifecycle) flags(fs *flag.FlagSet) {
	e := cli.EnvOf(fs)
	e.Duration(&l.delay, "shutdown-delay", "MCPQ_SHUTDOWN_DELAY", 5*time.Second, "api: on SIGTERM, how long /readyz answers 503 while requests are still served, before the listener closes (load balancers stop sending meanwhile); none on SIGINT (Ctrl-C)")
	e.Duration(&l.timeout, "shutdown-timeout", "MCPQ_SHUTDOWN_TIMEOUT", 20*time.Second, "api: after --shutdown-delay, how long in-flight requests get to finish; those still waiting then get a shutting-down error")
}

// check fails once shutdown has begun, turning /readyz 503.
func (l *lifecycle) check() telemetry.Check {
	return telemetry.Check{Name: "shutdown", Fn: func(context.Context) error {
		if l.draining.Load() {
			return errors.New("shutting down")
		}
		return nil
	}}
}

// muxes returns the mux of the public listener and, when admin is set, the
// handler of the admin listener. Without admin the public mux serves
// /healthz, /readyz and /metrics itself, as before.
//
// guard, when set, wraps /metrics on the public listener (authentication on:
// a bearer token is required there, since the public port is reachable by
// every client; the admin listener is for the operator's network only).
func (l *lifecycle) muxes(admin string, reg *prometheus.Registry, checks []telemetry.Check, guard func(http.Handler) http.Handler) (public *http.ServeMux, adminH http.Handler) {
	checks = append(checks, l.check())
	if admin == "" {
		adm := cli.AdminMux(reg, checks...)
		if guard == nil {
			return adm, nil
		}
		public = http.NewServeMux()
		public.Handle("/healthz", adm)
		public.Handle("/readyz", adm)
		public.Handle("/metrics", guard(adm))
		return public, nil
	}
	adm := cli.AdminMux(reg, checks...)
	public = http.NewServeMux()
	public.Handle("/healthz", adm)
	public.Handle("/readyz", adm)
	return public, adm
}

// listeners are the api's sockets, opened before anything starts (run), so
// that an address in use fails at once, naming it, and not after the
// embedded NATS and the in-process worker are up.
type listeners struct {
	public, admin net.Listener // admin nil without --admin
}

// openListeners opens --listen and --admin and, for the all-in-one
// (natsListen set), checks that the embedded NATS's address is free.
func openListeners(listen, admin, natsListen string) (*listeners, error) {
	var ls listeners
	var err error
	if ls.public, err = listenOn("", listen); err != nil {
		return nil, err
	}
	if admin != "" {
		if ls.admin, err = listenOn("--admin: ", admin); err != nil {
			ls.close()
			return nil, err
		}
	}
	if natsListen != "" {
		probe, err := listenOn("embedded NATS: ", natsListen)
		if err != nil {
			ls.close()
			return nil, err
		}
		_ = probe.Close() // free again for the embedded server
	}
	return &ls, nil
}

// close closes the listeners serve did not take over.
func (ls *listeners) close() {
	for _, ln := range []net.Listener{ls.public, ls.admin} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// listenOn listens on addr; its error reads "<what>listen <addr>: address
// already in use", without the net package's repetitions.
func listenOn(what, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err
		}
		var sys *os.SyscallError
		if errors.As(err, &sys) {
			err = sys.Err
		}
		return nil, fmt.Errorf("%slisten %s: %w", what, addr, err)
	}
	return ln, nil
}

// signalled is the cause of main's context: the signal that ended it.
type signalled struct{ os.Signal }

func (s signalled) Error() string { return s.String() + " signal received" }

// notifyContext is signal.NotifyContext for SIGINT and SIGTERM, with the
// signal as the context's cause (signalled).
func notifyContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			cancel(signalled{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel(nil) }
}

// serve runs srv on ls.public (and adminH on ls.admin, when set) until ctx
// ends, then shuts down as the type comment says, except that after a
// Ctrl-C (SIGINT: a person at a terminal, no load balancer) the listener
// closes at once, without --shutdown-delay. It returns once srv has
// stopped, or the first serve error.
func (l *lifecycle) serve(ctx context.Context, srv *http.Server, ls *listeners, adminH http.Handler, conns *connFlags, log zerolog.Logger) error {
	ln := limitConns(ls.public, conns.maxConns, conns.maxPerClient, log)
	errc := make(chan error, 2)
	if adminH != nil {
		aln := ls.admin
		asrv := &http.Server{Handler: guardBodies(adminH, conns.bodyTimeout), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: conns.idleTimeout}
		defer func() { _ = asrv.Close() }() // liveness answers until the very end
		go func() { errc <- asrv.Serve(aln) }()
		log.Info().Str("url", "http://"+aln.Addr().String()).Msg("admin listening (/healthz, /readyz, /metrics)")
	}
	base, endRequests := context.WithCancelCause(context.Background())
	defer endRequests(nil)
	srv.BaseContext = func(net.Listener) context.Context { return base }
	go func() { errc <- srv.Serve(ln) }()
	log.Info().Str("url", "http://"+ln.Addr().String()+"/mcp").Msg("api listening")

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	l.draining.Store(true)
	delay := l.delay
	if s := (signalled{}); errors.As(context.Cause(ctx), &s) && s.Signal == os.Interrupt {
		delay = 0
	}
	log.Info().Dur("delay", delay).Msg("shutting down: /readyz answers 503; the listener closes after the delay")
	select {
	case <-time.After(delay):
	case err := <-errc:
		return err
	}
	log.Info().Dur("timeout", l.timeout).Msg("draining in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err == nil {
		return nil
	}
	// Past the bound: the requests still waiting answer that the server is
	// shutting down, and get a moment to write it.
	log.Warn().Err(err).Msg("requests still in flight after --shutdown-timeout; ending them")
	endRequests(mcpfront.ErrShuttingDown)
	fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer fcancel()
	if err := srv.Shutdown(fctx); err != nil {
		_ = srv.Close()
	}
	return nil
}
