package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/procs"
)

// The peer run (--peer-url, --peer-bin) drives another MCP server speaking
// the same 2026-07-28 wire — a reference implementation — with the same
// client and the same task rows as the backends: (b), (b′) and (d). Its
// process's CPU goes in the api column; it has no worker or broker.

// runPeer runs the task rows against the peer; the run is named after the
// server's serverInfo.
func runPeer(ctx context.Context, c *config, cl *cleanup) *backendRun {
	r := &backendRun{name: "peer", peer: true}
	r.err = func() error {
		endpoint, where := c.peerURL, "already running"
		var p *proc
		if c.peerBin != "" {
			port, err := procs.FreePort()
			if err != nil {
				return err
			}
			if p, err = start("peer", c.peerBin, []string{"MCPKIT_PEER_QUIET=1"}, "--addr", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
				return err
			}
			defer cl.add("stop peer", func() { p.Stop(10 * time.Second) })()
			endpoint, where = fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "started by the bench ("+filepath.Base(c.peerBin)+")"
		}
		cli, err := newMCP(endpoint, c.conc)
		if err != nil {
			return err
		}
		logf("peer: waiting for %s to list %s", endpoint, c.call.name)
		server, err := waitTools(ctx, cli, p, c.call.name)
		if err != nil {
			return fmt.Errorf("peer at %s: %w", endpoint, err)
		}
		if server != "" {
			r.name = server
		}
		pids := map[string]int{"bench": os.Getpid()}
		cpuOf := "its process's CPU in the api column"
		pid := 0
		if p != nil {
			pid = p.Pid()
		} else if pid = listenerPID(endpoint); pid == 0 {
			cpuOf = "its process not found on this machine: no CPU figures for it"
		}
		if pid > 0 {
			pids["api"] = pid
			cpuOf += fmt.Sprintf(" (pid %d)", pid)
		}
		r.desc = fmt.Sprintf("peer MCP server at %s, %s; %s, no worker or broker", endpoint, where, cpuOf)
		r.durability = "the peer's own (not known to the bench)"
		var watched []*proc
		if p != nil {
			watched = []*proc{p}
		}
		x := &runner{ctx: ctx, c: c, name: r.name, pids: pids, procs: watched}
		return x.taskRows(r, cli)
	}()
	return r
}

// listenerPID is the pid of the local process listening on the TCP port of
// endpoint, found from /proc/net/tcp{,6} (the listening socket's inode) and
// the /proc/<pid>/fd links to it; 0 when the host is not this machine's
// loopback or no process (that this user may see) holds the socket.
func listenerPID(endpoint string) int {
	u, err := url.Parse(endpoint)
	if err != nil {
		return 0
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback() && !ip.IsUnspecified()) {
		return 0
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		port = 80
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		for _, ino := range listeningInodes(f, port) {
			inodes["socket:["+ino+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	fdDirs, _ := filepath.Glob("/proc/[0-9]*/fd")
	for _, fdDir := range fdDirs {
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && inodes[link] {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(fdDir)))
				return pid
			}
		}
	}
	return 0
}

// listeningInodes reads a /proc/net/tcp-format table and returns the
// inodes of the sockets in LISTEN state (0A) on port.
func listeningInodes(table string, port int) []string {
	b, err := os.ReadFile(table)
	if err != nil {
		return nil
	}
	var out []string
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[min(1, len(lines)):] { // after the header
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(l)
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
			out = append(out, f[9])
		}
	}
	return out
}
