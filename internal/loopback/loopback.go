// Package loopback tells whether a host or a listen address is this machine
// only: the one rule that the api's auth defaults, the embedded NATS server's
// credentials, the console's host check and jwtauth's http-only-on-loopback
// rule share.
package loopback

import (
	"net"
	"strings"
)

// Host reports whether host — a name, an IP address, or an IPv6 address in
// brackets — is this machine only: "localhost" or a loopback IP. Other names
// are not resolved: a name could point anywhere tomorrow.
func Host(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Addr reports whether a host:port address (a listen address, an HTTP Host
// header with a port) names this machine only. An address without a port is
// taken as a host.
func Addr(addr string) bool {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return Host(h)
	}
	return Host(addr)
}
