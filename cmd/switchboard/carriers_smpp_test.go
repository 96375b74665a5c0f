package main

// End-to-end tests of the SMPP carrier link (docs/carriers.md): the real
// server, with a providers file, against a real SMSC (SMPP 3.4 over TCP,
// provider/smpp/smsc) started in the test process.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/linxGnu/gosmpp/data"

	"github.com/switchboard/switchboard/ops"
	"github.com/switchboard/switchboard/provider/smpp/smsc"
)

const (
	smscSystemID = "sbtest"
	smscPassword = "pw-1d9f3a" // read from C1_PASSWORD: never logged
)

// smppCase is a tenant with a phone on an SMPP link to an in-process SMSC,
// and the server.
type smppCase struct {
	smsc      *smsc.Server
	s         *server
	tn        tenant
	number    string // the carrier phone's number
	phoneID   string
	providers string
}

func smppGetenv(k string) string {
	if k == "C1_PASSWORD" {
		return smscPassword
	}
	return ""
}

// writeProviders writes a providers file with one smpp link "c1" to addr,
// extra fields overriding the defaults.
func writeProviders(t testing.TB, links ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"links": links})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "providers.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func smppLink(addr string, extra map[string]any) map[string]any {
	l := map[string]any{"name": "c1", "type": "smpp", "addr": addr, "system_id": smscSystemID, "password_env": "C1_PASSWORD",
		"window": 10, "in_doubt_resend_after": 2}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// startSMPPCase starts an SMSC, the server with a link c1 to it, and a
// tenant with a phone on the link, and waits until the phone is online.
func startSMPPCase(t *testing.T, db string, link map[string]any, serverArgs ...string) *smppCase {
	t.Helper()
	c := &smppCase{smsc: &smsc.Server{SystemID: smscSystemID, Password: smscPassword}}
	if err := c.smsc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.smsc.Close)
	c.providers = writeProviders(t, smppLink(c.smsc.Addr(), link))
	c.tn = newTenant(t, db, "--plan", "scale")
	c.number = ops.SimulatedNumber()
	var ph struct {
		ID, Kind, Status string
		Provider         *string
		Channels         []string
	}
	out := cli(t, db, "phone", "add", "--tenant", c.tn.ID, "--number", c.number, "--provider", "c1", "--providers", c.providers, "--daily-limit", "0")
	if err := json.Unmarshal([]byte(out), &ph); err != nil {
		t.Fatal(err)
	}
	if ph.Kind != "smpp" || ph.Provider == nil || *ph.Provider != "c1" || !slices.Equal(ph.Channels, []string{"sms"}) {
		t.Fatalf("phone add --provider c1 printed %s", out)
	}
	c.phoneID = ph.ID
	c.s = startServerEnv(t, db, smppGetenv, append([]string{"--providers", c.providers}, serverArgs...)...)
	c.waitOnline(t, true)
	return c
}

func (c *smppCase) waitOnline(t *testing.T, online bool) {
	t.Helper()
	want := map[bool]string{true: "online", false: "offline"}[online]
	eventually(t, 30*time.Second, "the carrier phone "+want, func() bool {
		r := c.s.do(t, "GET", "/v1/phones/"+c.phoneID, c.tn.Live, nil)
		return r.Status == http.StatusOK && r.Data()["status"] == want
	})
}

// send sends body from the carrier phone to a recipient never in quiet
// hours, and returns the message id.
func (c *smppCase) send(t testing.TB, to, body string) string {
	t.Helper()
	r := c.s.do(t, "POST", "/v1/messages", c.tn.Live, map[string]any{"to": to, "body": body, "from": c.number, "channel": "sms"})
	if r.Status != http.StatusAccepted {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	return r.Data()["message_id"].(string)
}

// message reads a message.
func (c *smppCase) message(t testing.TB, id string) map[string]any {
	t.Helper()
	r := c.s.do(t, "GET", "/v1/messages/"+id, c.tn.Live, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("get message: %d %s", r.Status, r.Raw)
	}
	return r.Data()
}

// waitFinal waits until the message is delivered or failed, and returns it.
func (c *smppCase) waitFinal(t testing.TB, id string, within time.Duration) map[string]any {
	t.Helper()
	var m map[string]any
	eventually(t, within, "message "+id+" final", func() bool {
		m = c.message(t, id)
		return m["status"] == "delivered" || m["status"] == "failed"
	})
	return m
}

// textsOf returns, per body, how many times the SMSC received it whole
// (a long text's parts put together by their header).
func textsOf(subs []smsc.Submit) map[string]int {
	out := map[string]int{}
	type key struct {
		from, to   string
		ref, total int
	}
	parts := map[key]map[int]string{}
	for _, s := range subs {
		if s.ID == "" && s.Total == 0 {
			continue // refused
		}
		if s.Total <= 1 {
			out[s.Text]++
			continue
		}
		k := key{s.From, s.To, s.Ref, s.Total}
		if parts[k] == nil {
			parts[k] = map[int]string{}
		}
		if _, dup := parts[k][s.Part]; dup {
			out["DUPLICATE PART: "+parts[k][s.Part]]++
		}
		parts[k][s.Part] = s.Text
		if len(parts[k]) == s.Total {
			var b strings.Builder
			for i := 1; i <= s.Total; i++ {
				b.WriteString(parts[k][i])
			}
			out[b.String()]++
			delete(parts, k)
		}
	}
	return out
}

// TestSMPPLink runs the behaviours of an SMPP link on one server per
// database: bind, submit, receipts, encodings, long texts, inbound texts,
// refusals.
func TestSMPPLink(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		c := startSMPPCase(t, db, nil)

		t.Run("bind", func(t *testing.T) {
			if c.smsc.Binds() < 1 || c.smsc.Bound() != 1 {
				t.Fatalf("binds %d, bound %d", c.smsc.Binds(), c.smsc.Bound())
			}
			if strings.Contains(c.s.logs.String(), smscPassword) {
				t.Fatal("the server logged the SMPP password")
			}
			if !strings.Contains(c.s.logs.String(), `"msg":"SMPP link up: bound as transceiver"`) {
				t.Fatalf("no info line for the bind:\n%s", c.s.logs.String())
			}
		})

		t.Run("submit and receipt", func(t *testing.T) {
			id := c.send(t, "+15005550000", "Your code is 123456")
			m := c.waitFinal(t, id, 30*time.Second)
			if m["status"] != "delivered" || m["sent_at"] == nil || m["delivered_at"] == nil {
				t.Fatalf("message: %v", m)
			}
			var sub *smsc.Submit
			for _, s := range c.smsc.Submits() {
				if s.Text == "Your code is 123456" {
					sub = &s
				}
			}
			if sub == nil {
				t.Fatal("the SMSC got no submit_sm with the text")
			}
			if sub.From != strings.TrimPrefix(c.number, "+") || sub.To != "15005550000" || sub.Registered != 1 || sub.Coding != data.GSM7BITCoding || sub.Total != 0 {
				t.Fatalf("submit_sm: %+v", *sub)
			}
		})

		t.Run("receipts of each stat", func(t *testing.T) {
			stats := map[string]struct {
				err, status, reason string
			}{
				"DELIVRD": {"000", "delivered", ""},
				"UNDELIV": {"005", "failed", "SMPP receipt stat:UNDELIV err:005 (undeliverable)"},
				"REJECTD": {"011", "failed", "SMPP receipt stat:REJECTD err:011 (rejected by the SMSC)"},
				"EXPIRED": {"000", "failed", "SMPP receipt stat:EXPIRED err:000 (validity period expired before delivery)"},
				"DELETED": {"000", "failed", "SMPP receipt stat:DELETED err:000 (deleted by the SMSC)"},
				"UNKNOWN": {"099", "failed", "SMPP receipt stat:UNKNOWN err:099 (the SMSC does not know what became of it)"},
				"ENROUTE": {"000", "sent", ""},
				"ACCEPTD": {"000", "sent", ""},
			}
			c.smsc.SetOnSubmit(func(s *smsc.Submit) smsc.Action {
				stat, _, _ := strings.Cut(s.Text, " ")
				return smsc.Action{Stat: stat, Err: stats[stat].err}
			})
			defer c.smsc.SetOnSubmit(nil)
			ids := map[string]string{}
			for stat := range stats {
				ids[stat] = c.send(t, "+15005550002", stat+" receipt test")
			}
			for stat, want := range stats {
				var m map[string]any
				if want.status == "sent" {
					eventually(t, 30*time.Second, stat+" message sent", func() bool {
						m = c.message(t, ids[stat])
						return m["status"] != "queued"
					})
				} else {
					m = c.waitFinal(t, ids[stat], 30*time.Second)
				}
				if m["status"] != want.status {
					t.Errorf("stat %s: status %v, want %s", stat, m["status"], want.status)
				}
				reason, _ := m["failure_reason"].(string)
				if reason != want.reason {
					t.Errorf("stat %s: failure_reason %q, want %q", stat, reason, want.reason)
				}
				if want.status == "failed" && m["error_code"] != "DELIVERY_FAILED" {
					t.Errorf("stat %s: error_code %v", stat, m["error_code"])
				}
			}
		})

		t.Run("receipt ids in decimal and TLVs", func(t *testing.T) {
			// Some SMSCs give the id in hex in submit_sm_resp and in
			// decimal in the receipt, and the id and state in TLVs.
			c.smsc.DecimalReceiptIDs, c.smsc.ReceiptTLVs = true, true
			defer func() { c.smsc.DecimalReceiptIDs, c.smsc.ReceiptTLVs = false, false }()
			id := c.send(t, "+15005550003", "decimal receipt id")
			if m := c.waitFinal(t, id, 30*time.Second); m["status"] != "delivered" {
				t.Fatalf("message: %v", m)
			}
		})

		t.Run("long and UCS-2 texts", func(t *testing.T) {
			gsmLong := strings.Repeat("Long GSM text, with {braces} and € signs. ", 10) // 420 chars; 440 septets
			ucs2 := "Привет, мир! Код 4711 👋"
			ucs2Long := strings.Repeat("Доставка завтра 📦 ", 10)
			cases := []struct {
				body          string
				coding        byte
				parts         int
				maxPartLength int // characters of GSM-7 septets / UTF-16 units
			}{
				{gsmLong, data.GSM7BITCoding, 3, 153},
				{ucs2, data.UCS2Coding, 1, 70},
				{ucs2Long, data.UCS2Coding, 3, 67}, // 190 UTF-16 units: the emoji are two each
				{strings.Repeat("y", 160), data.GSM7BITCoding, 1, 160},
				{strings.Repeat("z", 161), data.GSM7BITCoding, 2, 153},
			}
			before := len(c.smsc.Submits())
			var ids []string
			for _, tc := range cases {
				ids = append(ids, c.send(t, "+15005550004", tc.body))
			}
			for i, id := range ids {
				if m := c.waitFinal(t, id, 30*time.Second); m["status"] != "delivered" {
					t.Fatalf("case %d: %v", i, m)
				}
			}
			subs := c.smsc.Submits()[before:]
			texts := textsOf(subs)
			for i, tc := range cases {
				if texts[tc.body] != 1 {
					t.Errorf("case %d: the SMSC got the text %d times, want 1 (%v)", i, texts[tc.body], texts)
				}
				n := 0
				for _, s := range subs {
					if !strings.Contains(tc.body, s.Text) || s.Text == "" {
						continue
					}
					n++
					if s.Coding != tc.coding {
						t.Errorf("case %d: data_coding %d, want %d", i, s.Coding, tc.coding)
					}
					length := utf8.RuneCountInString(s.Text)
					if tc.coding == data.UCS2Coding {
						length = len(utf16Units(s.Text))
					} else {
						length += strings.Count(s.Text, "€") + strings.Count(s.Text, "{") + strings.Count(s.Text, "}")
					}
					if length > tc.maxPartLength {
						t.Errorf("case %d: a part of %d units, more than %d", i, length, tc.maxPartLength)
					}
					if tc.parts > 1 && (s.Total != tc.parts || s.EsmClass&data.SM_UDH_GSM == 0) {
						t.Errorf("case %d: part header total %d (want %d), esm_class %#x", i, s.Total, tc.parts, s.EsmClass)
					}
					if tc.parts == 1 && s.Total != 0 {
						t.Errorf("case %d: a single text with a concatenation header", i)
					}
				}
				if n != tc.parts {
					t.Errorf("case %d: %d parts, want %d", i, n, tc.parts)
				}
			}
		})

		t.Run("a long text fails when one part fails", func(t *testing.T) {
			c.smsc.SetOnSubmit(func(s *smsc.Submit) smsc.Action {
				if s.Part == 2 {
					return smsc.Action{Stat: "UNDELIV", Err: "069"}
				}
				return smsc.Action{}
			})
			defer c.smsc.SetOnSubmit(nil)
			id := c.send(t, "+15005550005", strings.Repeat("part failure ", 30))
			m := c.waitFinal(t, id, 30*time.Second)
			if m["status"] != "failed" || m["failure_reason"] != "part 2 of 3: SMPP receipt stat:UNDELIV err:069 (undeliverable)" {
				t.Fatalf("message: %v", m)
			}
		})

		t.Run("submit_sm refused", func(t *testing.T) {
			c.smsc.SetOnSubmit(func(s *smsc.Submit) smsc.Action {
				return smsc.Action{Status: data.ESME_RINVDSTADR}
			})
			defer c.smsc.SetOnSubmit(nil)
			id := c.send(t, "+15005550006", "to a bad address")
			m := c.waitFinal(t, id, 30*time.Second)
			if m["status"] != "failed" || m["failure_reason"] != "SMPP submit_sm_resp ESME_RINVDSTADR (0x0000000B: Invalid Dest Addr)" {
				t.Fatalf("message: %v", m)
			}
		})

		t.Run("inbound texts", func(t *testing.T) {
			from := "+15005550007"
			c.smsc.SendMO(from, c.number, "Hello there", 0)
			long := strings.Repeat("Ответ: да, приду завтра. ", 8) // UCS-2, 3 parts
			c.smsc.SendMO(from, c.number, long, 42)
			var got []map[string]any
			eventually(t, 30*time.Second, "two inbound texts", func() bool {
				r := c.s.do(t, "GET", "/v1/messages?direction=inbound&limit=100", c.tn.Live, nil)
				got = nil
				for _, m := range r.List() {
					if m["from"] == from {
						got = append(got, m)
					}
				}
				return len(got) >= 2
			})
			bodies := map[string]bool{}
			for _, m := range got {
				bodies[m["body"].(string)] = true
				if m["to"] != c.number || m["status"] != "received" {
					t.Errorf("inbound: %v", m)
				}
			}
			if !bodies["Hello there"] || !bodies[long] || len(got) != 2 {
				t.Fatalf("inbound bodies: %v", bodies)
			}
			// STOP opts the sender out.
			c.smsc.SendMO(from, c.number, "stop", 0)
			eventually(t, 30*time.Second, "the sender opted out", func() bool {
				r := c.s.do(t, "POST", "/v1/messages", c.tn.Live, map[string]any{"to": from, "body": "after stop", "from": c.number})
				return r.Code() == "RECIPIENT_OPTED_OUT"
			})
			eventually(t, 10*time.Second, "every deliver_sm answered", func() bool { return c.smsc.Pending() == 0 })
		})

		t.Run("window", func(t *testing.T) {
			c.smsc.ResetMaxOutstanding()
			c.smsc.SetOnSubmit(func(s *smsc.Submit) smsc.Action { return smsc.Action{Delay: 300 * time.Millisecond} })
			defer c.smsc.SetOnSubmit(nil)
			var ids []string
			for i := range 40 {
				ids = append(ids, c.send(t, "+15005550008", fmt.Sprintf("w%02d window test", i)))
			}
			for _, id := range ids {
				if m := c.waitFinal(t, id, 60*time.Second); m["status"] != "delivered" {
					t.Fatalf("message: %v", m)
				}
			}
			if n := c.smsc.MaxOutstanding(); n > 10 || n < 2 {
				t.Fatalf("at most %d submit_sm were outstanding at once; the window is 10", n)
			}
		})
	})
}

func utf16Units(s string) []uint16 {
	var out []uint16
	for _, r := range s {
		if r >= 0x10000 {
			out = append(out, 0, 0)
		} else {
			out = append(out, 0)
		}
	}
	return out
}

// TestSMPPThrottling: an SMSC that answers ESME_RTHROTTLED gets no
// submit_sm for the pause (1 s, doubling) and every message is delivered
// once; a link's tps cap spaces its submit_sm.
func TestSMPPThrottling(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	// A window of 1: the next submit_sm can only be written once the link
	// has read the answer to the last, so the SMSC's clock shows the pause.
	c := startSMPPCase(t, db, map[string]any{"tps": 20, "window": 1})
	deliverAll := func(prefix string, count int) []smsc.Submit {
		t.Helper()
		before := len(c.smsc.Submits())
		var ids []string
		for i := range count {
			ids = append(ids, c.send(t, "+15005550009", fmt.Sprintf("%s%02d tps test", prefix, i)))
		}
		for _, id := range ids {
			if m := c.waitFinal(t, id, 90*time.Second); m["status"] != "delivered" {
				t.Fatalf("message: %v", m)
			}
		}
		subs := c.smsc.Submits()[before:]
		texts := textsOf(subs)
		for i := range count {
			if body := fmt.Sprintf("%s%02d tps test", prefix, i); texts[body] != 1 {
				t.Errorf("%q accepted %d times, want once", body, texts[body])
			}
		}
		return subs
	}

	// The cap: 20 a second, so 30 submit_sm span at least 29/20 s.
	subs := deliverAll("c", 30)
	if span := subs[len(subs)-1].At.Sub(subs[0].At); span < 29*time.Second/20-50*time.Millisecond {
		t.Fatalf("30 submit_sm within %v: more than 20 a second", span)
	}

	// Throttling: every fifth submit_sm is refused.
	var mu sync.Mutex
	var throttledAt []time.Time
	var n atomic.Int64
	c.smsc.SetOnSubmit(func(s *smsc.Submit) smsc.Action {
		if n.Add(1)%5 == 0 {
			mu.Lock()
			throttledAt = append(throttledAt, time.Now())
			mu.Unlock()
			return smsc.Action{Status: data.ESME_RTHROTTLED}
		}
		return smsc.Action{}
	})
	subs = deliverAll("t", 20)
	mu.Lock()
	defer mu.Unlock()
	if len(throttledAt) == 0 {
		t.Fatal("the SMSC never throttled")
	}
	// Honoured: after a throttle, nothing for at least the pause (1 s; a
	// little less for the clocks).
	for _, at := range throttledAt {
		for _, s := range subs {
			if s.At.After(at) && s.At.Before(at.Add(900*time.Millisecond)) {
				t.Fatalf("a submit_sm %v after ESME_RTHROTTLED", s.At.Sub(at))
			}
		}
	}
}

// TestSMPPBindDrops: the SMSC drops the bind with submit_sm outstanding,
// twice: once having taken the message whose submit_sm it drops on (its
// receipt comes on the next bind), once losing it. The link binds again,
// nothing is lost, and a part whose answer was lost is not written again
// while a receipt shows the SMSC has it: every text reaches the SMSC once.
func TestSMPPBindDrops(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		c := startSMPPCase(t, db, map[string]any{"window": 10, "in_doubt_resend_after": 2})
		// The SMSC holds its answers until every message is accepted (the
		// phone is offline while the bind is down), then drops the bind on
		// the 5th submit_sm after, with four unanswered before it, and later
		// loses one.
		armed := make(chan struct{})
		var isArmed atomic.Bool
		var n atomic.Int64
		var lost atomic.Value
		c.smsc.SetOnSubmit(func(s *smsc.Submit) smsc.Action {
			if !isArmed.Load() {
				return smsc.Action{Wait: armed}
			}
			switch n.Add(1) {
			case 5:
				return smsc.Action{Drop: true} // kept: its receipt follows
			case 25:
				lost.Store(s.Text)
				return smsc.Action{Lose: true} // never arrived
			}
			return smsc.Action{Delay: 150 * time.Millisecond}
		})
		const count = 45
		var ids []string
		for i := range count {
			ids = append(ids, c.send(t, "+15005550001", fmt.Sprintf("d%02d drop test", i)))
		}
		isArmed.Store(true)
		close(armed)
		for _, id := range ids {
			if m := c.waitFinal(t, id, 90*time.Second); m["status"] != "delivered" {
				t.Fatalf("message: %v", m)
			}
		}
		texts := textsOf(c.smsc.Submits())
		for i := range count {
			if body := fmt.Sprintf("d%02d drop test", i); texts[body] != 1 {
				t.Errorf("the SMSC has %q %d times, want once", body, texts[body])
			}
		}
		if lost.Load() == nil || c.smsc.Binds() < 3 {
			t.Fatalf("the SMSC dropped no bind (binds %d)", c.smsc.Binds())
		}
		logs := c.s.logs.String()
		for _, want := range []string{`"msg":"SMPP link down"`, `"msg":"receipts settled parts in doubt: not written again"`,
			`"msg":"SMPP parts in doubt had no receipt: writing them again"`} {
			if !strings.Contains(logs, want) {
				t.Errorf("no log line %s", want)
			}
		}
		eventually(t, 10*time.Second, "every receipt answered", func() bool { return c.smsc.Pending() == 0 })
	})
}

// TestSMPPKill kills Switchboard (SIGKILL) with submit_sm outstanding and
// starts it again on the same database: every accepted message is
// delivered, and a part the SMSC took before the kill is not written again
// (its receipt, on the next bind, settles it).
func TestSMPPKill(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		sm := &smsc.Server{SystemID: smscSystemID, Password: smscPassword}
		if err := sm.Start(); err != nil {
			t.Fatal(err)
		}
		defer sm.Close()
		sm.SetOnSubmit(func(*smsc.Submit) smsc.Action { return smsc.Action{Delay: 300 * time.Millisecond} })
		providers := writeProviders(t, smppLink(sm.Addr(), map[string]any{"window": 10, "in_doubt_resend_after": 3}))
		tn := newTenant(t, db, "--plan", "scale")
		number := ops.SimulatedNumber()
		cli(t, db, "phone", "add", "--tenant", tn.ID, "--number", number, "--provider", "c1", "--providers", providers, "--daily-limit", "0")
		env := []string{"C1_PASSWORD=" + smscPassword}
		args := []string{"--providers", providers, "--delivery-lease", "2s"}
		p := startProcessEnv(t, db, env, args...)
		s := &server{t: t, URL: p.URL}
		eventually(t, 30*time.Second, "the link up", func() bool { return sm.Bound() == 1 })
		eventually(t, 30*time.Second, "the phone online", func() bool {
			r := s.do(t, "GET", "/v1/phones", tn.Live, nil)
			for _, ph := range r.List() {
				if ph["number"] == number {
					return ph["status"] == "online"
				}
			}
			return false
		})
		const count = 60
		ids := map[string]string{}
		for i := range count {
			body := fmt.Sprintf("k%02d kill test", i)
			r := s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": "+15005550000", "body": body, "from": number, "channel": "sms"})
			if r.Status != http.StatusAccepted {
				t.Fatalf("send: %d %s", r.Status, r.Raw)
			}
			ids[r.Data()["message_id"].(string)] = body
		}
		// Kill with submit_sm outstanding: the SMSC answers each after 300 ms.
		eventually(t, 60*time.Second, "submit_sm flowing", func() bool { return sm.SubmitCount() >= 15 })
		outstanding := sm.SubmitCount()
		p.kill()
		t.Logf("killed with %d submit_sm received by the SMSC", outstanding)
		sm.SetOnSubmit(nil)

		p2 := startProcessEnv(t, db, env, args...)
		s2 := &server{t: t, URL: p2.URL}
		for id, body := range ids {
			var m map[string]any
			eventually(t, 90*time.Second, "message "+body+" final", func() bool {
				r := s2.do(t, "GET", "/v1/messages/"+id, tn.Live, nil)
				m = r.Data()
				return m["status"] == "delivered" || m["status"] == "failed"
			})
			if m["status"] != "delivered" {
				t.Errorf("%s: %v", body, m)
			}
		}
		texts := textsOf(sm.Submits())
		dups := 0
		for _, body := range ids {
			switch n := texts[body]; {
			case n == 0:
				t.Errorf("the SMSC never got %q", body)
			case n > 1:
				dups += n - 1
			}
		}
		// At least once: a part written in the last moments before the kill,
		// before it could be recorded as written, is written again. Never
		// more than the window.
		if dups > 10 {
			t.Errorf("%d texts written twice, more than the window of 10", dups)
		}
		t.Logf("%d accepted, all delivered; written twice across the kill: %d", count, dups)
		if strings.Contains(p.logs.String()+p2.logs.String(), smscPassword) {
			t.Error("the server logged the SMPP password")
		}
	})
}
