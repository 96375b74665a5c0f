package ssrf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBlocked(t *testing.T) {
	cases := []struct {
		addr    string
		blocked bool
	}{
		// Unspecified and "this network".
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"::", true},
		// Loopback.
		{"127.0.0.1", true},
		{"127.255.255.254", true},
		{"::1", true},
		// RFC 1918 and unique local.
		{"10.0.0.1", true},
		{"10.255.255.255", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"172.15.255.255", false},
		{"172.32.0.0", false},
		{"192.168.1.1", true},
		{"192.169.0.1", false},
		{"fc00::1", true},
		{"fd12:3456:789a::1", true},
		{"fe00::1", false},
		// Carrier-grade NAT.
		{"100.64.0.1", true},
		{"100.127.255.255", true},
		{"100.63.255.255", false},
		{"100.128.0.0", false},
		// Link-local, including the cloud metadata address.
		{"169.254.169.254", true},
		{"169.254.0.1", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"febf::1", true},
		// Multicast.
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"ff02::1", true},
		{"ff05::1:3", true},
		// Reserved and broadcast.
		{"240.0.0.1", true},
		{"255.255.255.255", true},
		{"192.0.0.8", true},
		{"198.18.0.1", true},
		{"198.19.255.255", true},
		{"198.20.0.0", false},
		{"fec0::1", true},
		{"100::1", true},
		{"::127.0.0.1", true}, // deprecated IPv4-compatible
		{"::8.8.8.8", true},
		{"64:ff9b:1::1", true},
		// Documentation.
		{"192.0.2.1", true},
		{"198.51.100.7", true},
		{"203.0.113.9", true},
		{"2001:db8::1", true},
		// IPv4-mapped addresses written as IPv6 (::ffff:0:0/96) are
		// blocked, whatever IPv4 address they embed.
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:0.0.0.0", true},
		{"::ffff:255.255.255.255", true},
		{"::ffff:100.64.0.1", true},
		{"::ffff:8.8.8.8", true},
		{"::ffff:808:808", true},
		// IPv4-translated (SIIT, ::ffff:0:0:0/96).
		{"::ffff:0:808:808", true},
		// Teredo (2001::/32) hides an IPv4 server and client.
		{"2001::1", true},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", true},
		{"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", true},
		{"2001:1::1", false},
		// NAT64 and 6to4 embedding a blocked IPv4 address.
		{"64:ff9b::7f00:1", true},
		{"64:ff9b::a9fe:a9fe", true},
		{"64:ff9b::808:808", false},
		{"2002:7f00:1::1", true},
		{"2002:c0a8:101::", true},
		{"2002:808:808::1", false},
		// Public addresses.
		{"8.8.8.8", false},
		{"1.1.1.1", false},
		{"93.184.216.34", false},
		{"11.0.0.1", false},
		{"223.255.255.255", false},
		{"2606:4700:4700::1111", false},
		{"2001:4860:4860::8888", false},
		{"2a00:1450:4001::1", false},
	}
	for _, c := range cases {
		ip := netip.MustParseAddr(c.addr)
		if got := Blocked(ip); got != c.blocked {
			t.Errorf("Blocked(%s) = %v, want %v", c.addr, got, c.blocked)
		}
	}
	if !Blocked(netip.Addr{}) {
		t.Error("Blocked(zero Addr) = false, want true")
	}
}

// fakeResolver returns answers[i] for the i-th call (the last answer for
// later calls) and counts calls.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]string
	errs    map[string]error
	calls   atomic.Int64
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err, ok := r.errs[host]; ok {
		return nil, err
	}
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	ans := seq[0]
	if len(seq) > 1 {
		r.answers[host] = seq[1:]
	}
	out := make([]net.IPAddr, 0, len(ans))
	for _, a := range ans {
		host, zone, _ := strings.Cut(a, "%")
		out = append(out, net.IPAddr{IP: net.ParseIP(host), Zone: zone})
	}
	return out, nil
}

// panicResolver fails the test if it is consulted.
type panicResolver struct{ t *testing.T }

func (r panicResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.t.Errorf("unexpected lookup of %q", host)
	return nil, errors.New("unexpected lookup")
}

func wantRefusal(t *testing.T, err error, reasonPart string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v (%T), want *Error", err, err)
	}
	if !strings.Contains(e.Reason, reasonPart) {
		t.Fatalf("reason %q does not contain %q", e.Reason, reasonPart)
	}
}

// wantBlocked checks a refusal of a host that resolves to a blocked
// address: its reason is the one that unresolvable hosts get too, so that it
// tells nothing about internal names; the kind of address is only
// in its cause, for logs.
func wantBlocked(t *testing.T, err error, kind string) {
	t.Helper()
	wantRefusal(t, err, NotPublic)
	var e *Error
	errors.As(err, &e)
	if e.Reason != NotPublic {
		t.Fatalf("reason %q, want exactly %q", e.Reason, NotPublic)
	}
	if cause := errors.Unwrap(e); cause == nil || !strings.Contains(cause.Error(), kind) {
		t.Fatalf("cause %v does not name %q", cause, kind)
	}
}

func TestCheckURLLiterals(t *testing.T) {
	ctx := context.Background()
	g := &Guard{Resolver: panicResolver{t}}
	refused := map[string]string{
		"http://127.0.0.1/hook":                          "loopback",
		"http://127.0.0.1:8080/hook":                     "loopback",
		"https://[::1]/":                                 "loopback",
		"http://[::ffff:127.0.0.1]/":                     "IPv4-mapped",
		"http://[::ffff:7f00:1]/":                        "IPv4-mapped",
		"http://10.1.2.3/":                               "private",
		"http://172.20.0.5/":                             "private",
		"http://192.168.0.10/":                           "private",
		"http://[fd00::1]/":                              "private",
		"http://169.254.169.254/latest/meta":             "link-local",
		"http://[fe80::1%25eth0]/":                       "link-local",
		"http://224.0.0.251/":                            "multicast",
		"http://[ff02::1]/":                              "multicast",
		"http://0.0.0.0/":                                "unspecified",
		"http://[::]/":                                   "unspecified",
		"http://100.100.100.200/":                        "shared",
		"http://255.255.255.255/":                        "reserved",
		"http://[::ffff:169.254.169.254]:80/x?y":         "IPv4-mapped",
		"http://[::ffff:8.8.8.8]/":                       "IPv4-mapped",
		"http://[::ffff:808:808]:443/":                   "IPv4-mapped",
		"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/": "Teredo",
	}
	for raw, kind := range refused {
		wantBlocked(t, g.CheckURL(ctx, raw), kind)
	}
	allowed := []string{
		"http://8.8.8.8/",
		"https://1.1.1.1:8443/hooks?x=1#frag",
		"HTTPS://93.184.216.34/",
		"https://[2606:4700:4700::1111]/hook",
	}
	for _, raw := range allowed {
		if err := g.CheckURL(ctx, raw); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", raw, err)
		}
	}

	// With AllowPrivate every literal above is accepted.
	gp := &Guard{AllowPrivate: true, Resolver: panicResolver{t}}
	for raw := range refused {
		if err := gp.CheckURL(ctx, raw); err != nil {
			t.Errorf("AllowPrivate: CheckURL(%q) = %v, want nil", raw, err)
		}
	}
}

func TestCheckURLMalformed(t *testing.T) {
	ctx := context.Background()
	for _, g := range []*Guard{{Resolver: panicResolver{t}}, {AllowPrivate: true, Resolver: panicResolver{t}}} {
		cases := map[string]string{
			"":                                "absolute",
			"/hooks":                          "absolute",
			"example.com/hooks":               "absolute",
			"//example.com/hooks":             "absolute",
			"http:example.com":                "absolute",
			"ftp://8.8.8.8/":                  "scheme",
			"file:///etc/passwd":              "scheme",
			"gopher://8.8.8.8/":               "scheme",
			"ws://8.8.8.8/":                   "scheme",
			"http://user:pass@8.8.8.8/":       "credentials",
			"http://user@8.8.8.8/":            "credentials",
			"https://:secret@8.8.8.8/":        "credentials",
			"http:///hooks":                   "host",
			"http://:80/hooks":                "host",
			"http://8.8.8.8:0/":               "port",
			"http://8.8.8.8:65536/":           "port",
			"http://8.8.8.8:/":                "port",
			"http://8.8.8.8:http/":            "not valid",
			"http://[::1/":                    "not valid",
			"http://exa mple.com/":            "not valid",
			"http://8.8.8.8/%zz":              "not valid",
			"http://example.com\x00.evil/":    "not valid",
			"https://8.8.8.8:99999999999999/": "port",
		}
		for raw, reason := range cases {
			err := g.CheckURL(ctx, raw)
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("CheckURL(%q) = %v, want *Error", raw, err)
				continue
			}
			if !strings.Contains(e.Reason, reason) {
				t.Errorf("CheckURL(%q) reason %q, want it to contain %q", raw, e.Reason, reason)
			}
		}
	}
}

func TestCheckURLResolvedNames(t *testing.T) {
	ctx := context.Background()
	newResolver := func() *fakeResolver {
		return &fakeResolver{
			answers: map[string][][]string{
				"public.example":   {{"8.8.8.8", "2606:4700:4700::1111"}},
				"private.example":  {{"10.1.2.3"}},
				"mixed.example":    {{"8.8.8.8", "127.0.0.1"}},
				"mapped.example":   {{"::ffff:192.168.1.1"}},
				"metadata.example": {{"169.254.169.254"}},
				"v6ll.example":     {{"fe80::1%eth0"}},
				"empty.example":    {{}},
			},
			errs: map[string]error{
				"servfail.example": &net.DNSError{Err: "server misbehaving", Name: "servfail.example", IsTemporary: true},
			},
		}
	}

	g := &Guard{Resolver: newResolver()}
	if err := g.CheckURL(ctx, "https://public.example/hooks"); err != nil {
		t.Errorf("public.example: %v", err)
	}
	wantBlocked(t, g.CheckURL(ctx, "https://private.example/"), "private")
	wantBlocked(t, g.CheckURL(ctx, "https://mixed.example/"), "loopback")
	wantBlocked(t, g.CheckURL(ctx, "https://mapped.example/"), "private")
	wantBlocked(t, g.CheckURL(ctx, "https://metadata.example/"), "link-local")
	wantBlocked(t, g.CheckURL(ctx, "https://v6ll.example/"), "link-local")
	// A name that does not resolve gets the same reason as one that
	// resolves to a private address: no oracle for internal names.
	for _, host := range []string{"empty", "nxdomain", "servfail"} {
		err := g.CheckURL(ctx, "https://"+host+".example/")
		var e *Error
		if !errors.As(err, &e) || e.Reason != NotPublic {
			t.Errorf("%s.example: %v, want the reason %q", host, err, NotPublic)
		}
	}
	err := g.CheckURL(ctx, "https://nxdomain.example/")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("nxdomain: cause not available via errors.As: %v", err)
	}
	if strings.Contains(err.Error(), "nxdomain.example") {
		t.Errorf("reason leaks resolver details: %q", err.Error())
	}

	gp := &Guard{AllowPrivate: true, Resolver: newResolver()}
	for _, host := range []string{"public", "private", "mixed", "mapped", "metadata", "v6ll"} {
		if err := gp.CheckURL(ctx, "https://"+host+".example/"); err != nil {
			t.Errorf("AllowPrivate %s.example: %v", host, err)
		}
	}
	wantRefusal(t, gp.CheckURL(ctx, "https://empty.example/"), "does not resolve")
	wantRefusal(t, gp.CheckURL(ctx, "https://nxdomain.example/"), "could not be resolved")
}

func TestNilGuardAndDefaultResolver(t *testing.T) {
	ctx := context.Background()
	var g *Guard
	wantBlocked(t, g.CheckURL(ctx, "http://127.0.0.1/"), "loopback")
	if err := g.CheckURL(ctx, "http://8.8.8.8/"); err != nil {
		t.Errorf("nil guard, public literal: %v", err)
	}
	// localhost either resolves to loopback or fails to resolve in a
	// sandbox; both must be refused.
	if err := (&Guard{}).CheckURL(ctx, "http://localhost:8080/"); err == nil {
		t.Error("CheckURL(localhost) = nil, want refusal")
	}
}

// TestDNSRebindingRefusedAtDial models a name that resolves to a public
// address when the url is registered and to loopback when a delivery
// connects: the connect-time check refuses it without dialling.
func TestDNSRebindingRefusedAtDial(t *testing.T) {
	ctx := context.Background()
	res := &fakeResolver{answers: map[string][][]string{
		"rebind.example": {{"8.8.8.8"}, {"127.0.0.1"}},
	}}
	g := &Guard{Resolver: res, dial: func(_ context.Context, _, addr string) (net.Conn, error) {
		t.Errorf("dialled %s", addr)
		return nil, errors.New("must not dial")
	}}
	if err := g.CheckURL(ctx, "http://rebind.example/hook"); err != nil {
		t.Fatalf("registration: %v", err)
	}
	if n := res.calls.Load(); n != 1 {
		t.Fatalf("resolver calls after CheckURL = %d, want 1", n)
	}
	conn, err := g.DialContext(ctx, "tcp", "rebind.example:80")
	if conn != nil {
		conn.Close()
	}
	wantBlocked(t, err, "loopback")
	if n := res.calls.Load(); n != 2 {
		t.Fatalf("resolver calls after DialContext = %d, want 2", n)
	}
}

func newCountingServer(t *testing.T) (*httptest.Server, *atomic.Int64, *atomic.Value) {
	t.Helper()
	var hits atomic.Int64
	var lastHost atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		lastHost.Store(r.Host)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits, &lastHost
}

// TestDialContextDialsVettedAddress shows that the connection goes to the
// address the single lookup returned: the name cannot be resolved any other
// way, a second lookup would get an unroutable address, and the resolver is
// consulted exactly once per connection.
func TestDialContextDialsVettedAddress(t *testing.T) {
	srv, hits, lastHost := newCountingServer(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	newResolver := func() *fakeResolver {
		return &fakeResolver{answers: map[string][][]string{
			// First answer vetted; any later lookup would be a rebinding
			// to an address that cannot be connected to.
			"vetted.example": {{"127.0.0.1"}, {"192.0.2.1"}},
		}}
	}

	t.Run("DialContext", func(t *testing.T) {
		res := newResolver()
		g := &Guard{AllowPrivate: true, Resolver: res}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := g.DialContext(ctx, "tcp", net.JoinHostPort("vetted.example", port))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if got, want := conn.RemoteAddr().String(), srv.Listener.Addr().String(); got != want {
			t.Errorf("dialled %s, want vetted %s", got, want)
		}
		if n := res.calls.Load(); n != 1 {
			t.Errorf("resolver calls = %d, want 1", n)
		}
	})

	t.Run("recorded dial address", func(t *testing.T) {
		var dialled []string
		g := &Guard{AllowPrivate: true, Resolver: newResolver(),
			dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dialled = append(dialled, network+" "+addr)
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}}
		conn, err := g.DialContext(context.Background(), "tcp", "vetted.example:"+port)
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		if want := []string{"tcp 127.0.0.1:" + port}; fmt.Sprint(dialled) != fmt.Sprint(want) {
			t.Errorf("dialled %q, want %q", dialled, want)
		}
	})

	t.Run("NewClient", func(t *testing.T) {
		res := newResolver()
		client := NewClient(&Guard{AllowPrivate: true, Resolver: res}, 5*time.Second)
		defer client.CloseIdleConnections()
		before := hits.Load()
		resp, err := client.Get("http://vetted.example:" + port + "/hook")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "ok" {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
		if hits.Load() != before+1 {
			t.Errorf("server hits = %d, want %d", hits.Load(), before+1)
		}
		if h := lastHost.Load(); h != "vetted.example:"+port {
			t.Errorf("Host header = %v, want the url's host", h)
		}
		if n := res.calls.Load(); n != 1 {
			t.Errorf("resolver calls = %d, want 1", n)
		}
	})
}

func TestDialContextRefusesBlockedAtConnect(t *testing.T) {
	srv, hits, _ := newCountingServer(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ctx := context.Background()
	res := &fakeResolver{answers: map[string][][]string{
		"localhost.example": {{"127.0.0.1", "::1"}},
		"mapped.example":    {{"::ffff:127.0.0.1"}},
	}}
	g := &Guard{Resolver: res}
	for _, addr := range []string{
		"127.0.0.1:" + port,
		"[::1]:" + port,
		"[::ffff:127.0.0.1]:" + port,
		"localhost.example:" + port,
		"mapped.example:" + port,
		"0.0.0.0:" + port,
	} {
		conn, err := g.DialContext(ctx, "tcp", addr)
		if conn != nil {
			conn.Close()
		}
		if err == nil {
			t.Errorf("DialContext(%s) succeeded", addr)
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("DialContext(%s) = %v, want *Error", addr, err)
		}
	}

	client := NewClient(g, 5*time.Second)
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("request to loopback succeeded")
	}
	wantBlocked(t, err, "loopback")
	if n := hits.Load(); n != 0 {
		t.Errorf("server was hit %d times", n)
	}
}

func TestDialContextOrderAndFiltering(t *testing.T) {
	res := &fakeResolver{answers: map[string][][]string{
		"multi.example": {{"127.0.0.1", "8.8.8.8", "10.0.0.1", "::ffff:169.254.169.254",
			"2001:4860:4860::8888", "1.1.1.1", "9.9.9.9"}},
	}}
	fail := map[string]bool{"8.8.8.8:443": true, "[2001:4860:4860::8888]:443": true}
	var dialled []string
	g := &Guard{Resolver: res, dial: func(_ context.Context, network, addr string) (net.Conn, error) {
		dialled = append(dialled, addr)
		if fail[addr] {
			return nil, fmt.Errorf("connect %s: refused", addr)
		}
		c1, c2 := net.Pipe()
		c2.Close()
		return c1, nil
	}}
	conn, err := g.DialContext(context.Background(), "tcp", "multi.example:443")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	want := []string{"8.8.8.8:443", "[2001:4860:4860::8888]:443", "1.1.1.1:443"}
	if fmt.Sprint(dialled) != fmt.Sprint(want) {
		t.Errorf("dialled %q, want %q", dialled, want)
	}

	// tcp4 and tcp6 only dial their own family.
	for network, want := range map[string][]string{
		"tcp4": {"8.8.8.8:443", "1.1.1.1:443"},
		"tcp6": {"[2001:4860:4860::8888]:443"},
	} {
		res.answers["multi.example"] = [][]string{{"127.0.0.1", "8.8.8.8", "2001:4860:4860::8888", "1.1.1.1"}}
		dialled = nil
		conn, err := g.DialContext(context.Background(), network, "multi.example:443")
		if conn != nil {
			conn.Close()
		}
		if network == "tcp6" {
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("tcp6: err = %v, want the dial error", err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", network, err)
		}
		if fmt.Sprint(dialled) != fmt.Sprint(want) {
			t.Errorf("%s: dialled %q, want %q", network, dialled, want)
		}
	}

	// When every attempt fails, the first error is returned.
	res.answers["multi.example"] = [][]string{{"8.8.8.8", "2001:4860:4860::8888"}}
	dialled = nil
	_, err = g.DialContext(context.Background(), "tcp", "multi.example:443")
	if err == nil || !strings.Contains(err.Error(), "8.8.8.8") {
		t.Errorf("err = %v, want the first dial error", err)
	}

	// Only blocked addresses: refused without dialling.
	res.answers["multi.example"] = [][]string{{"10.0.0.1", "fd00::1"}}
	dialled = nil
	_, err = g.DialContext(context.Background(), "tcp", "multi.example:443")
	wantBlocked(t, err, "private")
	if len(dialled) != 0 {
		t.Errorf("dialled %q", dialled)
	}

	// Nothing of the requested family.
	res.answers["multi.example"] = [][]string{{"8.8.8.8"}}
	_, err = g.DialContext(context.Background(), "tcp6", "multi.example:443")
	wantRefusal(t, err, NotPublic)

	// Resolver failures get the same reason as blocked addresses (the
	// attempt log shows it to the tenant), with the failure as the cause.
	_, err = g.DialContext(context.Background(), "tcp", "nxdomain.example:443")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) {
		t.Errorf("err = %v, want *net.DNSError", err)
	}
	wantRefusal(t, err, NotPublic)

	// Other networks and malformed addresses.
	if _, err := g.DialContext(context.Background(), "udp", "8.8.8.8:53"); err == nil {
		t.Error("udp accepted")
	}
	if _, err := g.DialContext(context.Background(), "tcp", "8.8.8.8"); err == nil {
		t.Error("address without port accepted")
	}
}

func TestControlBlocked(t *testing.T) {
	ctx := context.Background()
	for _, addr := range []string{"127.0.0.1:80", "[::1]:443", "[::ffff:10.0.0.1]:80", "[fe80::1%eth0]:80"} {
		wantRefusal(t, controlBlocked(ctx, "tcp", addr, nil), NotPublic)
	}
	if err := controlBlocked(ctx, "tcp4", "8.8.8.8:443", nil); err != nil {
		t.Errorf("public address refused: %v", err)
	}
}

func TestNewClientConfig(t *testing.T) {
	c := NewClient(nil, 0)
	if c.Timeout != DefaultTimeout || DefaultTimeout != 10*time.Second {
		t.Errorf("Timeout = %v, want 10s", c.Timeout)
	}
	if c := NewClient(&Guard{}, 3*time.Second); c.Timeout != 3*time.Second {
		t.Errorf("Timeout = %v, want 3s", c.Timeout)
	}
	tr, ok := c.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("Transport is %T", c.Transport)
	}
	if tr.Proxy != nil {
		t.Error("Proxy is set")
	}
	if tr.DialContext == nil || tr.DialTLSContext != nil || tr.Dial != nil || tr.DialTLS != nil {
		t.Error("dialling does not go through the guard only")
	}
	if tr.MaxIdleConnsPerHost != 64 || tr.IdleConnTimeout != 90*time.Second || !tr.ForceAttemptHTTP2 {
		t.Errorf("pooling: %d %v %v", tr.MaxIdleConnsPerHost, tr.IdleConnTimeout, tr.ForceAttemptHTTP2)
	}
	if c.CheckRedirect == nil {
		t.Error("CheckRedirect is nil")
	}
}

func TestNewClientDoesNotFollowRedirects(t *testing.T) {
	var followed atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	client := NewClient(&Guard{AllowPrivate: true}, 5*time.Second)
	defer client.CloseIdleConnections()
	resp, err := client.Post(srv.URL+"/hook", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Errorf("status = %d, want 302", resp.StatusCode)
	}
	if loc := resp.Header.Get("Location"); loc != "/elsewhere" {
		t.Errorf("Location = %q", loc)
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("redirect followed %d times", n)
	}
}

func TestNewClientTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)                 // runs second
	t.Cleanup(func() { close(release) }) // runs first

	client := NewClient(&Guard{AllowPrivate: true}, 200*time.Millisecond)
	defer client.CloseIdleConnections()
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err == nil {
		resp.Body.Close()
		t.Fatal("request to a hanging server succeeded")
	}
	var ue *url.Error
	if !errors.As(err, &ue) || !ue.Timeout() {
		t.Fatalf("err = %v, want a timeout", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a net.Error timeout", err)
	}
}
