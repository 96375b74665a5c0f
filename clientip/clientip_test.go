package clientip

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClient(t *testing.T) {
	p, err := ParseProxies(" 10.0.0.0/8, 192.0.2.10 ,::1,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		peer string
		xff  []string
		want string
	}{
		{"198.51.100.1:5000", nil, "198.51.100.1"},
		{"198.51.100.1:5000", []string{"203.0.113.1"}, "198.51.100.1"}, // not a trusted peer: its header is not believed
		{"10.1.2.3:5000", nil, "10.1.2.3"},                             // a trusted proxy that names nobody is the client
		{"10.1.2.3:5000", []string{"203.0.113.1"}, "203.0.113.1"},
		{"10.1.2.3:5000", []string{"6.6.6.6, 203.0.113.1"}, "203.0.113.1"},  // what the client wrote left of the proxy's entry is not believed
		{"10.1.2.3:5000", []string{"203.0.113.1, 10.9.9.9"}, "203.0.113.1"}, // through two trusted proxies
		{"10.1.2.3:5000", []string{"203.0.113.1", "192.0.2.10"}, "203.0.113.1"},
		{"10.1.2.3:5000", []string{"10.2.2.2, 192.0.2.10"}, "10.2.2.2"}, // every hop trusted: the leftmost
		{"10.1.2.3:5000", []string{"203.0.113.1, junk"}, "10.1.2.3"},    // an entry that does not parse stops at the last trusted hop
		{"10.1.2.3:5000", []string{"203.0.113.1:4711"}, "203.0.113.1"},
		{"10.1.2.3:5000", []string{"[2001:db8::1]:4711"}, "2001:db8::1"},
		{"[::1]:5000", []string{"2001:db8::7"}, "2001:db8::7"},
		{"[::ffff:10.1.2.3]:5000", []string{"::ffff:203.0.113.1"}, "203.0.113.1"},
		{"[fd00::1%eth0]:5000", []string{"203.0.113.1"}, "203.0.113.1"},
		{"@", []string{"203.0.113.1"}, "invalid IP"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		for _, h := range c.xff {
			r.Header.Add("X-Forwarded-For", h)
		}
		if got := p.Client(r).String(); got != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %s, want %s", c.peer, c.xff, got, c.want)
		}
	}
}

func TestParseProxies(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.1/", "1.2.3"} {
		if _, err := ParseProxies(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	p, err := ParseProxies("")
	if err != nil || p.Any() || p.Trusted(netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("the empty list: %v %v", p, err)
	}
	p, _ = ParseProxies("10.1.2.3/8")
	if !p.Trusted(netip.MustParseAddr("10.200.0.1")) {
		t.Error("a prefix written with host bits does not cover its network")
	}
}

func TestKey(t *testing.T) {
	for addr, want := range map[string]string{
		"198.51.100.1:80":           "198.51.100.1",
		"[2001:db8:1:2:3:4:5:6]:80": "2001:db8:1:2::/64",
		"2001:db8:1:2::9":           "2001:db8:1:2::/64",
		"[::ffff:198.51.100.1]:80":  "198.51.100.1",
		"[fe80::1%eth0]:80":         "fe80::/64",
		"pipe":                      "",
	} {
		if got := KeyOf(addr); got != want {
			t.Errorf("KeyOf(%q) = %q, want %q", addr, got, want)
		}
	}
}

// TestMiddleware: behind a trusted proxy, handlers see the client's
// address; a header from an untrusted peer is reported once.
func TestMiddleware(t *testing.T) {
	p, _ := ParseProxies("10.0.0.0/8")
	var seen string
	var warned []netip.Addr
	h := p.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.RemoteAddr }),
		func(peer netip.Addr) { warned = append(warned, peer) })
	serve := func(peer, xff string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Forwarded-For", xff)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	serve("10.0.0.1:1234", "2001:db8::5")
	if seen != "[2001:db8::5]:0" {
		t.Errorf("behind the proxy: %q", seen)
	}
	serve("198.51.100.1:1234", "203.0.113.1")
	serve("198.51.100.2:1234", "203.0.113.1")
	if seen != "198.51.100.2:1234" || len(warned) != 1 || warned[0].String() != "198.51.100.1" {
		t.Errorf("an untrusted peer: %q, warned %v", seen, warned)
	}
}

// FuzzClient: any header gives the peer or an address the header holds,
// never a panic, and never an address from a header an untrusted peer
// sent.
func FuzzClient(f *testing.F) {
	f.Add("10.0.0.1:1", "203.0.113.1, 10.0.0.2")
	f.Add("198.51.100.1:1", "203.0.113.1")
	f.Add("[::1]:1", "[2001:db8::1]:80,,junk")
	p, _ := ParseProxies("10.0.0.0/8,::1")
	f.Fuzz(func(t *testing.T, peer, xff string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Forwarded-For", xff)
		got := p.Client(r)
		if pa := Peer(peer); !p.Trusted(pa) && got != pa {
			t.Fatalf("untrusted peer %q gave %v", peer, got)
		}
		_ = Key(got)
	})
}
