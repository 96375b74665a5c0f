// Package clientip says who sent a request, for the limits that count per
// client: the connection's peer, or, when the peer is a reverse proxy the
// operator trusts (--trusted-proxies), the address the proxy says it
// forwarded for in X-Forwarded-For. It also names the network a limit
// counts as one client: an IPv4 address, or the /64 of an IPv6 address
// (the network one subscriber gets).
//
// It decides nothing itself: the limits live with what they protect.
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
)

// Proxies is the set of reverse proxies whose X-Forwarded-For is believed.
// The zero value trusts none: every client is the connection's peer.
type Proxies struct {
	prefixes []netip.Prefix
	// warned is set once a request carried X-Forwarded-For from a peer that
	// is not trusted (see Middleware).
	warned *atomic.Bool
}

// ParseProxies reads a comma-separated list of addresses and prefixes
// (192.0.2.10, 10.0.0.0/8, ::1, fd00::/8); an empty list trusts none.
func ParseProxies(list string) (Proxies, error) {
	p := Proxies{warned: new(atomic.Bool)}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			pr, err := netip.ParsePrefix(f)
			if err != nil {
				return Proxies{}, fmt.Errorf("%q is not an address or a prefix such as 10.0.0.0/8", f)
			}
			p.prefixes = append(p.prefixes, pr.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return Proxies{}, fmt.Errorf("%q is not an address or a prefix such as 10.0.0.0/8", f)
		}
		a = a.WithZone("").Unmap()
		p.prefixes = append(p.prefixes, netip.PrefixFrom(a, a.BitLen()))
	}
	return p, nil
}

// Any reports whether any proxy is trusted.
func (p Proxies) Any() bool { return len(p.prefixes) > 0 }

// Trusted reports whether a is the address of a trusted proxy.
func (p Proxies) Trusted(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	for _, pr := range p.prefixes {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// Client returns the address of the client that sent r: the peer, unless
// the peer is a trusted proxy; then the rightmost address of
// X-Forwarded-For that is not a trusted proxy (each proxy appends the
// address it received from, so entries left of the first untrusted one
// could be forged by the client). A header that does not parse stops the
// walk at the last trusted hop. The zero Addr when the peer is not an IP
// address.
func (p Proxies) Client(r *http.Request) netip.Addr {
	peer := Peer(r.RemoteAddr)
	if !peer.IsValid() || !p.Trusted(peer) {
		return peer
	}
	client := peer
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		list := strings.Split(hops[i], ",")
		for j := len(list) - 1; j >= 0; j-- {
			a := parseHop(list[j])
			if !a.IsValid() {
				return client
			}
			client = a
			if !p.Trusted(a) {
				return a
			}
		}
	}
	return client
}

// parseHop reads one entry of X-Forwarded-For: an address, possibly with a
// port ("192.0.2.1:4711", "[2001:db8::1]:4711").
func parseHop(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap()
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().WithZone("").Unmap()
	}
	return netip.Addr{}
}

// Peer is the address of a connection's peer, from a host:port such as
// http.Request.RemoteAddr or net.Conn.RemoteAddr().String(); the zero Addr
// when it is not an IP address.
func Peer(hostport string) netip.Addr {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}

// Middleware sets each request's RemoteAddr to its client's address (port
// 0 when it came through a proxy), so that every handler that counts per
// client address counts the client behind a trusted proxy, not the proxy.
// The first request with X-Forwarded-For from a peer that is not trusted
// is reported to warn, once: behind a proxy that --trusted-proxies does not
// name, every client shares the proxy's limits.
func (p Proxies) Middleware(h http.Handler, warn func(peer netip.Addr)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := Peer(r.RemoteAddr)
		if p.Trusted(peer) {
			if c := p.Client(r); c != peer {
				r.RemoteAddr = net.JoinHostPort(c.String(), "0")
			}
		} else if warn != nil && p.warned != nil && r.Header.Get("X-Forwarded-For") != "" && p.warned.CompareAndSwap(false, true) {
			warn(peer)
		}
		h.ServeHTTP(w, r)
	})
}

// Key names the client network of a: the address itself for IPv4, its /64
// for IPv6; "" for the zero Addr.
func Key(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	a = a.WithZone("").Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// KeyOf is Key of the address in a host:port (or a bare address), such as
// a request's RemoteAddr after Middleware.
func KeyOf(hostport string) string { return Key(Peer(hostport)) }
