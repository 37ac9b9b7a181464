package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// AllowList is where completion webhooks may go (the api's
// --webhook-allow): host names and IP networks. A nil or empty AllowList
// allows nothing: webhooks are off.
//
// A URL is accepted when its host is one of the names (compared without
// case) or an IP address inside one of the networks. The check is made
// again on the address each connection actually dials, so a name that
// resolves somewhere else later (DNS rebinding) reaches nothing it should
// not: an address inside a listed network is dialled; one outside is
// dialled only when it is a public address (not loopback, private,
// link-local, shared (100.64/10), unspecified or multicast) and the list
// names hosts. So a listed name may point at the internet but never into
// a private network the list does not name by its network.
type AllowList struct {
	hosts map[string]bool
	nets  []netip.Prefix
}

// ParseAllowList reads a comma-separated list of host names, IP addresses
// and CIDR networks ("hooks.example.com, 10.1.0.0/16, 127.0.0.1"). An
// empty list is nil: webhooks are off.
func ParseAllowList(list string) (*AllowList, error) {
	a := &AllowList{hosts: map[string]bool{}}
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			a.nets = append(a.nets, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(item); err == nil {
			a.nets = append(a.nets, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		if strings.ContainsAny(item, "/:@ ") || strings.Trim(item, ".") == "" {
			return nil, fmt.Errorf("webhook: allow list: %q is neither a host name, an IP address nor a CIDR network", item)
		}
		a.hosts[strings.ToLower(strings.TrimSuffix(item, "."))] = true
	}
	if len(a.hosts) == 0 && len(a.nets) == 0 {
		return nil, nil
	}
	return a, nil
}

// ErrOff is CheckURL's refusal when the AllowList is empty.
var ErrOff = errors.New("webhooks are off")

// ErrNotAllowed is CheckURL's (and a dial's) refusal of a host or address
// outside the AllowList; the error wrapping it names the host.
var ErrNotAllowed = errors.New("not in the webhook allow list")

// CheckURL parses raw, an absolute http or https URL without user
// information, and checks its host against the list. Its errors say what
// is wrong, naming the host when it is not allowed.
func (a *AllowList) CheckURL(raw string) (*url.URL, error) {
	if a == nil {
		return nil, ErrOff
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("webhook url %q must be an absolute http or https URL", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("webhook url %q must not carry user information", raw)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		if !a.inNets(ip) {
			return nil, fmt.Errorf("webhook host %s is %w (--webhook-allow)", host, ErrNotAllowed)
		}
		return u, nil
	}
	if !a.hosts[host] {
		return nil, fmt.Errorf("webhook host %q is %w (--webhook-allow)", host, ErrNotAllowed)
	}
	return u, nil
}

func (a *AllowList) inNets(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range a.nets {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// sharedSpace is the carrier-grade NAT range (RFC 6598), not public.
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// public reports whether ip is an address of the open internet.
func public(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsGlobalUnicast() && !ip.IsPrivate() && !sharedSpace.Contains(ip)
}

// AllowsDial reports whether a connection to ip may be made: ip is in one
// of the networks, or it is public and the list names hosts.
func (a *AllowList) AllowsDial(ip netip.Addr) bool {
	if a == nil {
		return false
	}
	return a.inNets(ip) || (len(a.hosts) > 0 && public(ip))
}

// control is a net.Dialer's Control: it refuses to connect to an address
// AllowsDial refuses, after resolution, whatever name led there.
func (a *AllowList) control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("webhook: dialling %s: %w", address, err)
	}
	if !a.AllowsDial(ip) {
		return fmt.Errorf("webhook: address %s is %w (--webhook-allow)", ip, ErrNotAllowed)
	}
	return nil
}
