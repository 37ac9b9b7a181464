package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpqueue/mcpqueue/internal/procs"
)

// histSystem is an api (authentication on) and a worker on one prefix,
// and a client that sends the principal's token.
type histSystem struct {
	api, worker *proc
	cli         *mcp
	pprof       string // with --pprof: the api's net/http/pprof base URL
	started     time.Time
	healthy     time.Time // when the api first answered /healthz
	stops       []func()
}

// historyToken writes a new HS256 key into dir for the apis
// (--auth-hs256-key-file) and returns it and the file. Each api checks
// tokens for its own URL, so startSystem mints one per api (mintToken).
func historyToken(dir string) (key []byte, file string, err error) {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	key = []byte(hex.EncodeToString(raw))
	file = filepath.Join(dir, "history-hs256.key")
	return key, file, os.WriteFile(file, key, 0o600)
}

// mintToken is a token of the history principal for the api at base.
func mintToken(key []byte, base string) (string, error) {
	now := time.Now()
	return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": historyIssuer, "sub": historySubject, "aud": base + "/mcp",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(historyKeep).Unix(),
	}).SignedString(key)
}

// startSystem starts api and worker on prefix and waits until the api
// lists the tool to the principal.
func startSystem(ctx context.Context, c *config, b *bins, beArgs []string, prefix, keyFile string, key []byte, cl *cleanup) (*histSystem, error) {
	port, err := procs.FreePort()
	if err != nil {
		return nil, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	common := append(append([]string{}, beArgs...), "--prefix", prefix, "--log-json", "--log-level", c.logLevel, "--shutdown-grace", "2s")
	s := &histSystem{started: time.Now()}
	var env []string
	if c.pprofDir != "" {
		pp, err := procs.FreePort()
		if err != nil {
			return nil, err
		}
		env = []string{fmt.Sprintf("MCPQ_BENCH_PPROF=127.0.0.1:%d", pp)}
		s.pprof = fmt.Sprintf("http://127.0.0.1:%d", pp)
	}
	s.api, err = start("api "+prefix, b.api, env, append(common, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		// Between rounds one count's clients sit idle while the others
		// run: their connections must outlast that.
		"--inline-wait", c.inlineWait.String(), "--task-ttl", "10s", "--idle-timeout", "10m",
		"--auth-hs256-key-file", keyFile, "--auth-issuer", historyIssuer)...)
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, cl.add("stop api "+prefix, func() { s.api.Stop(10 * time.Second) }))
	if err := waitHealthy(ctx, s.api, base+"/healthz"); err != nil {
		s.stop()
		return nil, err
	}
	s.healthy = time.Now()
	s.worker, err = start("worker "+prefix, b.worker, nil, append(common, "--concurrency", fmt.Sprint(c.workerConc))...)
	if err != nil {
		s.stop()
		return nil, err
	}
	s.stops = append(s.stops, cl.add("stop worker "+prefix, func() { s.worker.Stop(10 * time.Second) }))
	tok, err := mintToken(key, base)
	if err == nil {
		s.cli, err = newMCP(base+"/mcp", c.conc)
	}
	if err != nil {
		s.stop()
		return nil, err
	}
	s.cli.auth = []byte("Authorization: Bearer " + tok + "\r\n")
	if _, err := waitTools(ctx, s.cli, s.worker, c.call.name); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// stop stops worker and api.
func (s *histSystem) stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
}

// alive is nil while api and worker run.
func (s *histSystem) alive() error {
	for _, p := range []*proc{s.api, s.worker} {
		if err := p.gone(); err != nil {
			return err
		}
	}
	return nil
}

// quietAfter is how long after it answers /healthz an api has begun its
// first reaper pass: its reaper starts before it serves, and passes once
// --reap-interval (5s) has gone by; a margin for a loaded machine.
const quietAfter = 7 * time.Second

// waitQuiet waits until the api has begun its first reaper pass and then
// used less than 2% of a core in each of two seconds in a row (the pass,
// which reads every record once, is over), and returns the CPU seconds it
// used since it started.
func (s *histSystem) waitQuiet(ctx context.Context) (float64, error) {
	pid := s.api.Pid()
	last, _ := procCPU(pid)
	deadline := time.Now().Add(10 * time.Minute)
	for quiet := 0; quiet < 2; {
		if err := procs.Sleep(ctx, time.Second); err != nil {
			return 0, err
		}
		if err := s.alive(); err != nil {
			return 0, err
		}
		now, _ := procCPU(pid)
		quiet++
		if now-last >= 0.02 || time.Since(s.healthy) < quietAfter {
			quiet = 0
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("api %d still busy 10 minutes after its start", pid)
		}
		last = now
	}
	return last, nil
}

// cpuSelf is the CPU time the bench process used so far.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
