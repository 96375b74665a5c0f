package smpp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linxGnu/gosmpp/pdu"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/smpp/smsc"
)

// longText is a GSM-7 text of two parts.
func longText(i int) string { return fmt.Sprintf("%03d ", i) + strings.Repeat("x", 200) }

// TestConcatRefsPerRecipient: long texts to one handset never share a
// concatenation reference while in flight (here: 60 within minutes, which
// an 8-bit hash of the id would make collide); with udh16 the references
// are 16-bit (IEI 0x08).
func TestConcatRefsPerRecipient(t *testing.T) {
	for _, udh16 := range []bool{false, true} {
		t.Run(fmt.Sprint("udh16=", udh16), func(t *testing.T) {
			sm := &smsc.Server{}
			f := start(t, sm, carrier.Config{UDH16: udh16, Window: 50}, Options{}, true)
			waitFor(t, 20*time.Second, "the bind", f.link.Up)
			var ids []string
			for i := range 60 {
				ids = append(ids, f.send(t, "+15005550001", longText(i)).ID)
			}
			f.send(t, "+15005550002", longText(99)) // another handset
			for _, id := range ids {
				f.waitStatus(t, id, sb.StatusDelivered)
			}
			refOf := map[string]int{} // text number -> reference
			for _, s := range sm.Submits() {
				if s.Total != 2 || s.Ref16 != udh16 {
					t.Fatalf("a part with header total %d, 16-bit %v", s.Total, s.Ref16)
				}
				if s.Part == 1 && s.To == "15005550001" {
					refOf[s.Text[:3]] = s.Ref
				}
			}
			seen := map[int]string{}
			for text, ref := range refOf {
				if other, dup := seen[ref]; dup {
					t.Errorf("texts %s and %s to one handset share the reference %d", text, other, ref)
				}
				seen[ref] = text
			}
			if len(refOf) != 60 {
				t.Fatalf("%d texts", len(refOf))
			}
		})
	}
}

// TestLinkOptions: data_coding 1 (IA5: ASCII texts, one character an
// octet; others go as UCS-2, 8), the
// addresses' TON/NPI overrides, and the enquire_link interval.
func TestLinkOptions(t *testing.T) {
	one, zero, five, nine := 1, 0, 5, 9
	var enquiries atomic.Int64
	sm := &smsc.Server{Log: func(dir string, p pdu.PDU) {
		if _, ok := p.(*pdu.EnquireLink); ok && dir == "<" {
			enquiries.Add(1)
		}
	}}
	f := start(t, sm, carrier.Config{DataCoding: &one, SourceTON: &five, SourceNPI: &zero, DestTON: &zero, DestNPI: &nine, EnquireLink: 1}, Options{}, true)
	waitFor(t, 20*time.Second, "the bind", f.link.Up)
	g := f.send(t, "+15005550001", "plain text @ 100$")
	u := f.send(t, "+15005550001", "Привет")
	e := f.send(t, "+15005550001", "café") // GSM-7, not ASCII: UCS-2 under IA5
	f.waitStatus(t, e.ID, sb.StatusDelivered)
	f.waitStatus(t, g.ID, sb.StatusDelivered)
	f.waitStatus(t, u.ID, sb.StatusDelivered)
	for _, s := range sm.Submits() {
		want := byte(1)
		if s.Text == "Привет" || s.Text == "café" {
			want = 8
		}
		if s.Coding != want {
			t.Errorf("%q went with data_coding %d, want %d", s.Text, s.Coding, want)
		}
		if s.SrcTON != 5 || s.SrcNPI != 0 || s.DstTON != 0 || s.DstNPI != 9 {
			t.Errorf("addresses %d/%d %d/%d", s.SrcTON, s.SrcNPI, s.DstTON, s.DstNPI)
		}
	}
	if s, _ := sm.Find("plain text @ 100$"); s.Text == "" {
		t.Errorf("the GSM-7 text under data_coding 1 did not read back: %+v", sm.Submits())
	}
	waitFor(t, 20*time.Second, "two enquire_link", func() bool { return enquiries.Load() >= 2 })
}

// TestBindOverTLS: tls: true binds over TLS, checking the SMSC's
// certificate.
func TestBindOverTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	sm := &smsc.Server{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}
	f := start(t, sm, carrier.Config{TLS: true}, Options{RootCAs: pool}, true)
	waitFor(t, 20*time.Second, "the bind over TLS", f.link.Up)
	m := f.send(t, "+15005550001", "over tls")
	f.waitStatus(t, m.ID, sb.StatusDelivered)

	// A certificate the link does not trust: no bind.
	sm2 := &smsc.Server{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}
	clock := newFakeClock(1)
	f2 := start(t, sm2, carrier.Config{TLS: true}, Options{Now: clock.Now, Sleep: clock.Sleep}, true)
	waitFor(t, 20*time.Second, "the refusal logged", func() bool { return contains(f2.logs.String(), "SMPP bind failed", "certificate") })
	if sm2.Binds() != 0 {
		t.Fatal("bound over TLS to an untrusted SMSC")
	}
}

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "smsc"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}, pool
}
