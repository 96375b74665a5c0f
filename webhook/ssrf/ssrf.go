// Package ssrf keeps webhook deliveries from reaching internal networks.
//
// Switchboard refuses webhook urls whose host resolves to an address that
// Blocked reports, both when the url is registered (Guard.CheckURL) and
// again when a delivery connects (Guard.DialContext). At connect time the
// host is resolved exactly once and the vetted IP address itself is dialled,
// so a DNS answer that changes between the check and the connection (DNS
// rebinding) cannot redirect the delivery. Setting Guard.AllowPrivate (the
// --allow-private-webhooks flag) disables the address checks but keeps the
// single-lookup dialling.
//
// NewClient builds the http.Client used for deliveries on top of a Guard.
package ssrf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Error is a refusal by the guard. Reason is safe to show to the tenant who
// registered the url: it never contains resolved addresses or internal
// error details. The underlying cause, if any, is available through
// errors.Unwrap for logging.
type Error struct {
	// Reason is a short user-safe explanation, e.g.
	// "url resolves to a private address".
	Reason string

	err error
}

// NotPublic is the one reason given when a url's host does not resolve,
// resolves to nothing, or resolves to a blocked address, at registration and
// at connect time alike: telling these apart would let a tenant probe which
// internal host names exist. The cause (the resolver's error, or the kind of
// blocked address) is kept for logs, through errors.Unwrap. With
// AllowPrivate, where nothing is blocked, a name that does not resolve is
// reported as such.
const NotPublic = "url host does not resolve to a public address"

// notPublic returns the refusal of a host whose resolution failed with
// cause, or that resolves to the address ip of the blocked kind.
func notPublic(cause error) *Error { return &Error{Reason: NotPublic, err: cause} }

func blockedAddr(kind string, ip netip.Addr) *Error {
	return notPublic(fmt.Errorf("resolves to %s address (%s)", kind, ip))
}

// Error returns e.Reason.
func (e *Error) Error() string { return e.Reason }

// Unwrap returns the underlying cause, such as a *net.DNSError, or nil.
func (e *Error) Unwrap() error { return e.err }

// Resolver looks up the IP addresses of a host. *net.Resolver implements it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Guard vets webhook destinations. The zero value blocks every address that
// Blocked reports and resolves names with net.DefaultResolver. A Guard is
// safe for concurrent use, and a nil *Guard behaves like the zero value.
type Guard struct {
	// AllowPrivate disables the address checks, so that urls resolving to
	// blocked addresses are accepted and dialled. It corresponds to
	// --allow-private-webhooks.
	AllowPrivate bool

	// Resolver resolves host names. If nil, net.DefaultResolver is used.
	Resolver Resolver

	// dial replaces the real dialer in tests. It is always called with an
	// IP literal address.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

type blockedRange struct {
	prefix netip.Prefix
	kind   string
}

func mustRanges(kind string, cidrs ...string) []blockedRange {
	out := make([]blockedRange, len(cidrs))
	for i, c := range cidrs {
		out[i] = blockedRange{netip.MustParsePrefix(c), kind}
	}
	return out
}

// blockedRanges lists every blocked range. Keep the Blocked doc comment in
// sync with it.
var blockedRanges = concat(
	mustRanges("an unspecified", "0.0.0.0/8", "::/128"),
	mustRanges("a loopback", "127.0.0.0/8", "::1/128"),
	mustRanges("a private", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"),
	mustRanges("a shared (carrier-grade NAT)", "100.64.0.0/10"),
	mustRanges("a link-local", "169.254.0.0/16", "fe80::/10"),
	mustRanges("a multicast", "224.0.0.0/4", "ff00::/8"),
	mustRanges("a reserved", "192.0.0.0/24", "198.18.0.0/15", "240.0.0.0/4", // 240/4 includes 255.255.255.255
		"::/96", "100::/64", "fec0::/10", "64:ff9b:1::/48"),
	mustRanges("a documentation", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"),
	// Addresses that carry an IPv4 address inside IPv6: the IPv4-mapped
	// form written as IPv6 (resolver answers are unmapped before they get
	// here, see lookup), IPv4-translated (SIIT) and Teredo, whose server and
	// client addresses hide IPv4 addresses that may be internal.
	mustRanges("an IPv4-mapped", "::ffff:0:0/96"),
	mustRanges("an IPv4-translated", "::ffff:0:0:0/96"),
	mustRanges("a Teredo", "2001::/32"),
)

func concat(lists ...[]blockedRange) []blockedRange {
	var out []blockedRange
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// Blocked reports whether ip is an address webhooks must not be delivered
// to. Zones are ignored and the invalid zero Addr is blocked. An IPv4 address
// in its IPv6-mapped form (::ffff:a.b.c.d, as in http://[::ffff:8.8.8.8]/)
// is blocked whatever it embeds: a url names an IPv4 host as such. (Resolver
// answers cannot tell an A record from a mapped AAAA record, so the guard
// judges those by their IPv4 address before calling Blocked.)
// The blocked ranges are:
//
//	unspecified:     0.0.0.0/8 ("this network"), ::/128
//	loopback:        127.0.0.0/8, ::1/128
//	private:         10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7 (unique local)
//	shared (CGNAT):  100.64.0.0/10
//	link-local:      169.254.0.0/16, fe80::/10
//	multicast:       224.0.0.0/4, ff00::/8
//	reserved:        192.0.0.0/24 (IETF protocol assignments), 198.18.0.0/15 (benchmarking),
//	                 240.0.0.0/4 (reserved, including broadcast 255.255.255.255),
//	                 ::/96 (deprecated IPv4-compatible), 100::/64 (discard-only),
//	                 fec0::/10 (deprecated site-local), 64:ff9b:1::/48 (local-use NAT64)
//	documentation:   192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32
//	IPv4 in IPv6:    ::ffff:0:0/96 (IPv4-mapped), ::ffff:0:0:0/96 (IPv4-translated),
//	                 2001::/32 (Teredo)
//
// In addition, an address in the NAT64 prefix 64:ff9b::/96 or the 6to4
// prefix 2002::/16 is blocked when the IPv4 address embedded in it is
// blocked (for 6to4, bits 16 to 47).
func Blocked(ip netip.Addr) bool {
	return blockedKind(ip) != ""
}

// blockedKind returns the article and name of the range ip falls into, for
// use in error messages, or "" if ip is not blocked.
func blockedKind(ip netip.Addr) string {
	if !ip.IsValid() {
		return "an invalid"
	}
	ip = ip.WithZone("") // Prefix.Contains never matches zoned addresses.
	for _, r := range blockedRanges {
		if r.prefix.Contains(ip) {
			return r.kind
		}
	}
	if nat64Prefix.Contains(ip) {
		b := ip.As16()
		return blockedKind(netip.AddrFrom4([4]byte(b[12:16])))
	}
	if sixToFour.Contains(ip) {
		b := ip.As16()
		return blockedKind(netip.AddrFrom4([4]byte(b[2:6])))
	}
	// Belt and braces: the ranges above already cover all of these.
	switch {
	case ip.IsLoopback():
		return "a loopback"
	case ip.IsPrivate():
		return "a private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "a multicast"
	case ip.IsUnspecified():
		return "an unspecified"
	}
	return ""
}

func (g *Guard) resolver() Resolver {
	if g == nil || g.Resolver == nil {
		return net.DefaultResolver
	}
	return g.Resolver
}

func (g *Guard) allowPrivate() bool { return g != nil && g.AllowPrivate }

// lookup resolves host once. An IP literal (optionally with a zone) is
// returned as written, without consulting the resolver. The resolver's
// answers are unmapped: it returns A records in the IPv4-mapped form.
func (g *Guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	ipAddrs, err := g.resolver().LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(ipAddrs))
	for _, a := range ipAddrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if a.Zone != "" && ip.Is6() {
			ip = ip.WithZone(a.Zone)
		}
		out = append(out, ip)
	}
	return out, nil
}

// CheckURL vets a webhook url at registration. The url must be absolute,
// use the http or https scheme, name a host, carry no user information
// (credentials) and, if it has a port, a port between 1 and 65535. The host,
// an IP literal or a name, is resolved, and the url is refused if nothing
// resolves or, unless AllowPrivate is set, if any resolved address is
// Blocked; without AllowPrivate these refusals all have the reason
// NotPublic. Every refusal is an *Error.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &Error{Reason: "url is not valid", err: err}
	}
	if !u.IsAbs() || u.Opaque != "" {
		return &Error{Reason: "url must be an absolute http or https url"}
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return &Error{Reason: "url scheme must be http or https"}
	}
	if u.User != nil {
		return &Error{Reason: "url must not contain credentials"}
	}
	host := u.Hostname()
	if host == "" {
		return &Error{Reason: "url must have a host"}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return &Error{Reason: "url port is not valid"}
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return &Error{Reason: "url port is not valid"}
	}
	ips, err := g.lookup(ctx, host)
	if !g.allowPrivate() {
		switch {
		case err != nil:
			return notPublic(err)
		case len(ips) == 0:
			return notPublic(errors.New("resolves to no address"))
		}
		for _, ip := range ips {
			if kind := blockedKind(ip); kind != "" {
				return blockedAddr(kind, ip)
			}
		}
		return nil
	}
	if err != nil {
		return &Error{Reason: "url host could not be resolved", err: err}
	}
	if len(ips) == 0 {
		return &Error{Reason: "url host does not resolve to any address"}
	}
	return nil
}

// DialContext connects to addr ("host:port") on network "tcp", "tcp4" or
// "tcp6" and is meant to be used as http.Transport.DialContext. It resolves
// the host once (an IP literal is not looked up), drops addresses of the
// wrong family and, unless AllowPrivate is set, Blocked addresses, and
// returns an *Error if none remain. It then dials the remaining addresses as
// IP literals, in the order the resolver returned them, until one connects;
// there is no second DNS lookup. If every attempt fails it returns the
// first dial error. A resolver failure is returned unchanged with
// AllowPrivate, and otherwise as the cause of an *Error with the reason
// NotPublic, like a blocked address (the tenant sees the reason).
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &Error{Reason: "unsupported network " + strconv.Quote(network)}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := g.lookup(ctx, host)
	if err != nil {
		if !g.allowPrivate() {
			return nil, notPublic(err)
		}
		return nil, err
	}
	allowed := make([]netip.Addr, 0, len(ips))
	var refused *Error
	for _, ip := range ips {
		if (network == "tcp4" && !ip.Is4()) || (network == "tcp6" && !ip.Is6()) {
			continue
		}
		if !g.allowPrivate() {
			if kind := blockedKind(ip); kind != "" {
				if refused == nil {
					refused = blockedAddr(kind, ip)
				}
				continue
			}
		}
		allowed = append(allowed, ip)
	}
	if len(allowed) == 0 {
		switch {
		case refused != nil:
			return nil, refused
		case !g.allowPrivate():
			return nil, notPublic(errors.New("resolves to no usable address"))
		}
		return nil, &Error{Reason: "url host does not resolve to any usable address"}
	}

	dial := g.dialFunc()
	var firstErr error
	for _, ip := range allowed {
		if err := ctx.Err(); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			break
		}
		conn, err := dial(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

func (g *Guard) dialFunc() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if g != nil && g.dial != nil {
		return g.dial
	}
	d := &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
	}
	if !g.allowPrivate() {
		// Defence in depth: check the socket address right before connect.
		d.ControlContext = controlBlocked
	}
	return d.DialContext
}

// controlBlocked refuses to connect a socket to a Blocked address.
func controlBlocked(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("ssrf: unexpected dial address %q: %w", address, err)
	}
	// The socket's address is in the form the kernel uses, not one a url
	// chose: an IPv4 address in its mapped form is judged as IPv4.
	if ip := ap.Addr().Unmap(); blockedKind(ip) != "" {
		return blockedAddr(blockedKind(ip), ip)
	}
	return nil
}

// DefaultTimeout is the total delivery timeout NewClient uses when given a
// non-positive timeout.
const DefaultTimeout = 10 * time.Second

// NewClient returns an http.Client for webhook deliveries. Its transport
// dials through g.DialContext (a nil g behaves like a zero Guard), ignores
// proxy settings, keeps up to 64 idle connections per host for 90 seconds
// and attempts HTTP/2. timeout bounds each request as a whole, including
// reading the response body; a non-positive timeout means DefaultTimeout.
// Redirects are not followed: the 3xx response is returned to the caller,
// which treats it as a failed attempt.
func NewClient(g *Guard, timeout time.Duration) *http.Client {
	if g == nil {
		g = &Guard{}
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            g.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  1 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
