package main

// End-to-end tests of the device protocol (docs/phones.md): real
// Android phones running "SMS Gateway for Android", played over real HTTP
// by the reference device (provider/android/agent) and by hand, with the
// wire types of the app's Go client (github.com/android-sms-gateway/client-go)
// so that a field the app does not know fails a test.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/android-sms-gateway/client-go/smsgateway"

	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider/android/agent"
)

// devArgs are the serve flags of the device tests: phones go offline 2 s
// after their device was last seen, and a message handed to a device is
// valid there for 3 s, so that the tests see both happen.
var devArgs = []string{"--allow-private-webhooks", "--phone-offline-after", "2s", "--device-valid-for", "3s"}

// devURL is the device API of s.
func devURL(s *server) string { return s.URL + "/api/mobile/v1" }

var devClient = &http.Client{Timeout: 30 * time.Second}

// devCall makes one raw request of the device protocol and decodes the
// answer into out (when the status is 2xx and out is set).
func devCall(t testing.TB, s *server, method, path, auth string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, devURL(s)+path, rd)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := devClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		// Errors are the app's {"message": ...}.
		var e smsgateway.ErrorResponse
		if err := json.Unmarshal(raw, &e); err != nil || e.Message == "" {
			t.Errorf("%s %s: %d with a body that is not {\"message\"}: %s", method, path, res.StatusCode, raw)
		}
	} else if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return res.StatusCode
}

// devRegisterStatus tries to pair a device with code and returns the status.
func devRegisterStatus(t testing.TB, s *server, code string) int {
	name := "test"
	return devCall(t, s, "POST", "/device", "Code "+code, smsgateway.MobileRegisterRequest{Name: &name}, nil)
}

// devPhone adds an android phone and returns its id, number and code.
func devPhone(t testing.TB, s *server, key string, extra map[string]any) (id, number, code string) {
	t.Helper()
	body := map[string]any{"number": msgFreshNumber("+1415XXXXXXX")}
	for k, v := range extra {
		body[k] = v
	}
	d := phoneCreate(t, s, key, body)
	id, number, code = d["id"].(string), d["number"].(string), d["pairing"].(map[string]any)["code"].(string)
	for strings.HasPrefix(code, "0000") { // the wrong codes of devPairBurst
		r := s.do(t, "POST", "/v1/phones/"+id+"/pairing", key, nil)
		if r.Status != 200 {
			t.Fatalf("a new pairing code: %d %s", r.Status, r.Raw)
		}
		code = r.Data()["code"].(string)
	}
	return id, number, code
}

// devAgent pairs a reference device with code and, when run, holds its
// event stream open until the test ends (or stop is called).
func devAgent(t testing.TB, s *server, code string, opt agent.Options, run bool) (a *agent.Agent, stop func()) {
	t.Helper()
	opt.URL = devURL(s)
	a, err := agent.Pair(context.Background(), opt, code)
	if err != nil {
		t.Fatalf("pair: %v", err)
	}
	return a, devRun(t, a, run)
}

func devRun(t testing.TB, a *agent.Agent, run bool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if run {
		go func() { a.Run(ctx); close(done) }()
	} else {
		close(done)
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// devOnlyAndroid deletes the simulated phone tenant create gave, so that
// live sends go to the tenant's android phones.
func devOnlyAndroid(t testing.TB, s *server, tn tenant) {
	t.Helper()
	if r := s.do(t, "DELETE", "/v1/phones/"+tn.Phone.ID, tn.Live, nil); r.Status != 200 {
		t.Fatalf("delete the simulated phone: %d %s", r.Status, r.Raw)
	}
}

// devHeld waits until the device holds message id and returns it.
func devHeld(t testing.TB, a *agent.Agent, id string) smsgateway.MobileMessage {
	t.Helper()
	var m smsgateway.MobileMessage
	eventually(t, 30*time.Second, "the device to take "+id, func() bool {
		var ok bool
		m, ok = a.Held()[id]
		return ok
	})
	return m
}

func TestDevicePairing(t *testing.T) {
	t.Parallel()
	runShared(t, devArgs, []sharedCase{
		{"codes", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			id, _, code := devPhone(t, s, tn.Live, map[string]any{"sim_number": 2})
			if status := devCall(t, s, "POST", "/device", "", smsgateway.MobileRegisterRequest{}, nil); status != 401 {
				t.Errorf("no Authorization: %d, want 401", status)
			}
			wrong := "00000000"
			if code == wrong {
				wrong = "00000001"
			}
			if status := devRegisterStatus(t, s, wrong); status != 401 {
				t.Errorf("wrong code: %d, want 401", status)
			}
			name := "Pixel 8"
			var reg smsgateway.MobileRegisterResponse
			if status := devCall(t, s, "POST", "/device", "code "+code, smsgateway.MobileRegisterRequest{Name: &name}, &reg); status != 201 {
				t.Fatalf("pairing: %d", status)
			}
			if len(reg.Id) != 21 || len(reg.Token) < 32 || reg.Login != id || reg.Password != "" {
				t.Errorf("pairing answer: %+v", reg)
			}
			if status := devRegisterStatus(t, s, code); status != 401 {
				t.Errorf("used code: %d, want 401", status)
			}
			// The phone is paired and online, its device named.
			p := phoneGet(t, s, tn.Live, id)
			dev, _ := p["device"].(map[string]any)
			if p["status"] != "online" || p["last_seen_at"] == nil || dev["name"] != "Pixel 8" || dev["sim_number"] != 2.0 {
				t.Errorf("paired phone: %v", p)
			}
			// What the app asks after pairing, in its own types.
			var me smsgateway.MobileDeviceResponse
			if status := devCall(t, s, "GET", "/device", "Bearer "+reg.Token, nil, &me); status != 200 || me.Device == nil || me.Device.ID != reg.Id || me.Device.Name != "Pixel 8" {
				t.Errorf("GET /device: %d %+v", status, me)
			}
			// The settings an unattended phone needs, in the app's names
			// (client-go models all but the gateway section).
			var settings struct {
				smsgateway.DeviceSettings
				Gateway struct {
					NotificationChannel *string `json:"notification_channel"`
				} `json:"gateway"`
			}
			if status := devCall(t, s, "GET", "/settings", "Bearer "+reg.Token, nil, &settings); status != 200 {
				t.Errorf("GET /settings: %d", status)
			}
			if m := settings.Messages; m == nil || m.LimitPeriod == nil || *m.LimitPeriod != smsgateway.Disabled || m.LimitValue == nil || *m.LimitValue != 0 ||
				m.ProcessingOrder == nil || *m.ProcessingOrder != smsgateway.FIFO || m.SendIntervalMin == nil || *m.SendIntervalMin != 0 || m.SendIntervalMax != nil ||
				settings.Gateway.NotificationChannel == nil || *settings.Gateway.NotificationChannel != "SSE_ONLY" {
				t.Errorf("GET /settings: %+v %+v", settings.Messages, settings.Gateway)
			}
			// Whether the app has a Google push token shows in the record.
			pushToken := func() any {
				dev, _ := phoneGet(t, s, tn.Live, id)["device"].(map[string]any)
				return dev["push_token"]
			}
			if got := pushToken(); got != false {
				t.Errorf("paired without a push token: push_token %v", got)
			}
			for _, tok := range []string{"gHz-T6NezDlOfllr7F-Be", ""} {
				if status := devCall(t, s, "PATCH", "/device", "Bearer "+reg.Token, smsgateway.MobileUpdateRequest{Id: reg.Id, PushToken: tok}, nil); status != 204 {
					t.Errorf("PATCH /device: %d, want 204", status)
				}
				if got := pushToken(); got != (tok != "") {
					t.Errorf("after PATCH /device with push token %q: push_token %v", tok, got)
				}
			}
			var hooks []smsgateway.Webhook
			if status := devCall(t, s, "GET", "/webhooks", "Bearer "+reg.Token, nil, &hooks); status != 200 || len(hooks) != 3 ||
				hooks[0].Event != smsgateway.WebhookEventSmsReceived || hooks[1].Event != smsgateway.WebhookEventSystemPing || hooks[2].Event != "app:started" ||
				hooks[1].URL != hooks[0].URL || hooks[2].URL != hooks[0].URL || !strings.HasPrefix(hooks[0].URL, devURL(s)+"/inbound/") ||
				hooks[0].DeviceID == nil || *hooks[0].DeviceID != reg.Id {
				t.Errorf("GET /webhooks: %d %+v", status, hooks)
			}
			var msgs smsgateway.MobileGetMessagesResponse
			if status := devCall(t, s, "GET", "/message?order=lifo", "Bearer "+reg.Token, nil, &msgs); status != 200 || len(msgs) != 0 {
				t.Errorf("GET /message with nothing waiting: %d %v", status, msgs)
			}
			for _, auth := range []string{"", "Bearer nope", "Bearer " + reg.Token + "x", "Code " + code} {
				if status := devCall(t, s, "GET", "/message", auth, nil, nil); status != 401 {
					t.Errorf("GET /message with %q: %d, want 401", auth, status)
				}
			}
		}},
		{"an expired code", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			id, _, code := devPhone(t, s, tn.Live, nil)
			// The clock cannot be moved: the code's expiry is.
			dbtest.Exec(t, db, `UPDATE phones SET pairing_expires_at = ? WHERE id = ?`, time.Now().Add(-time.Second).UnixMicro(), id)
			if status := devRegisterStatus(t, s, code); status != 401 {
				t.Errorf("expired code: %d, want 401", status)
			}
		}},
		{"re-pairing from the app's private token, at a URL typed with a trailing slash", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			id, number, code := devPhone(t, s, tn.Live, nil)
			first, _ := devAgent(t, s, code, agent.Options{}, false)
			// The app registers again without a sign-in: Bearer <code>,
			// where the person typed https://HOST/api/mobile/v1/.
			slash := devURL(s) + "/"
			if status := devCall(t, s, "POST", "//device", "Bearer 00000000", smsgateway.MobileRegisterRequest{}, nil); status != 401 {
				t.Errorf("a wrong code as Bearer at //device: %d, want 401", status)
			}
			fresh := s.do(t, "POST", "/v1/phones/"+id+"/pairing", tn.Live, nil).Data()["code"].(string)
			a, err := agent.Pair(context.Background(), agent.Options{URL: slash, PairWithBearer: true}, fresh)
			if err != nil {
				t.Fatalf("pairing with Bearer <code> at %s: %v", slash, err)
			}
			devRun(t, a, true)
			if _, err := first.Device(context.Background()); !isStatus(err, 401) {
				t.Errorf("the device replaced by the Bearer pairing: %v, want 401", err)
			}
			eventually(t, 30*time.Second, "the stream at "+slash, a.Connected)
			to := msgAwake(t)
			mid := msgSend(t, s, tn.Live, map[string]any{"to": to, "body": "hi"})["message_id"].(string)
			if m := msgWait(t, s, tn.Live, mid, "delivered"); m["from"] != number || a.SentCount(mid) != 1 {
				t.Errorf("delivered through the slashed URL: %v, sent %d times", m, a.SentCount(mid))
			}
			if _, err := a.Inbound(context.Background(), to, "STOP"); err != nil {
				t.Fatal(err)
			}
			msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": to, "body": "x"}), 400, "RECIPIENT_OPTED_OUT", "")
		}},
		{"re-pairing and deleting lock the old device out", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			id, _, code := devPhone(t, s, tn.Live, nil)
			first, _ := devAgent(t, s, code, agent.Options{}, true)
			if _, err := first.Device(context.Background()); err != nil {
				t.Fatalf("first device: %v", err)
			}
			r := s.do(t, "POST", "/v1/phones/"+id+"/pairing", tn.Live, nil)
			second, _ := devAgent(t, s, r.Data()["code"].(string), agent.Options{}, false)
			if _, err := first.Device(context.Background()); !isStatus(err, 401) {
				t.Errorf("the replaced device: %v, want 401", err)
			}
			if _, err := second.Device(context.Background()); err != nil {
				t.Errorf("the new device: %v", err)
			}
			if r := s.do(t, "DELETE", "/v1/phones/"+id, tn.Live, nil); r.Status != 200 {
				t.Fatalf("delete: %d %s", r.Status, r.Raw)
			}
			if _, err := second.Device(context.Background()); !isStatus(err, 401) {
				t.Errorf("the device of a deleted phone: %v, want 401", err)
			}
		}},
	})
}

// TestDevicePairingRateLimited: pairing attempts are counted before their
// code is looked up, per client and per node, so that a code cannot be
// guessed in its lifetime: a burst of wrong codes sent at once from one
// address gets 401 for the client's budget and 429 (with Retry-After) for
// the rest. A pairing that succeeds counts for nothing, and a code that
// cannot be one (not 8 digits) is 401 without counting.
func TestDevicePairingRateLimited(t *testing.T) {
	t.Parallel()
	s := startServer(t, sqliteURL(t), devArgs...)
	tn := msgTenant(t, s.DB)
	// Many phones pair from one address.
	for i := range 12 {
		_, _, code := devPhone(t, s, tn.Live, nil)
		if status := devRegisterStatus(t, s, code); status != 201 {
			t.Fatalf("pairing %d: %d", i, status)
		}
	}
	for _, bad := range []string{"1234567", "123456789", "abcdefgh"} {
		if status := devRegisterStatus(t, s, bad); status != 401 {
			t.Errorf("the code %q: %d, want 401", bad, status)
		}
	}
	_, _, code := devPhone(t, s, tn.Live, nil)
	start := time.Now()
	got := devPairBurst(t, s, 100, "")
	most := 10 + int(time.Since(start)/(6*time.Second))
	if got[401] < 10 || got[401] > most || got[401]+got[429] != 100 {
		t.Errorf("100 wrong codes at once from one address: %v, want 10 to %d 401s and 429 for the rest", got, most)
	}
	// While limited, even the right code waits.
	if status := devRegisterStatus(t, s, code); status != 429 {
		t.Errorf("the right code while limited: %d, want 429", status)
	}
	eventually(t, 10*time.Second, "the metrics of the refusals", func() bool {
		m := scrapeSeries(t, s.URL)
		return m[`switchboard_device_pairing_limited_total{limit="client"}`] >= float64(100-most+1) &&
			m[`switchboard_device_pairings_total{result="paired"}`] == 12
	})
}

// TestDevicePairingBehindProxy: behind a reverse proxy named by
// --trusted-proxies, each client behind it has its own pairing budget
// (the address X-Forwarded-For gives), so one client's wrong codes do not
// lock the others out; without the flag, the proxy is the client, and the
// node warns that requests carry X-Forwarded-For.
func TestDevicePairingBehindProxy(t *testing.T) {
	t.Parallel()
	for _, trusted := range []bool{true, false} {
		t.Run(map[bool]string{true: "trusted", false: "not trusted"}[trusted], func(t *testing.T) {
			t.Parallel()
			args := devArgs
			if trusted {
				args = append(slices.Clone(devArgs), "--trusted-proxies", "127.0.0.0/8, ::1")
			}
			s := startServer(t, sqliteURL(t), args...)
			tn := msgTenant(t, s.DB)
			_, _, code := devPhone(t, s, tn.Live, nil)
			if got := devPairBurst(t, s, 15, "198.51.100.1"); got[429] == 0 {
				t.Fatalf("15 wrong codes from one client: %v, want 429s", got)
			}
			status := devPairFrom(t, s, code, "203.0.113.5, 198.51.100.200") // the rightmost untrusted hop is the client
			switch {
			case trusted && status != 201:
				t.Errorf("another client behind the proxy, with a live code: %d, want 201", status)
			case !trusted && status != 429:
				t.Errorf("another client behind a proxy that is not trusted: %d, want 429 (the proxy is the client)", status)
			}
			warned := strings.Contains(s.logs.String(), "X-Forwarded-For from a peer that --trusted-proxies does not name")
			if warned == trusted {
				t.Errorf("warned about X-Forwarded-For: %v, with the proxy trusted: %v", warned, trusted)
			}
		})
	}
}

// devPairFrom tries to pair with code, with X-Forwarded-For: xff when xff
// is set, and returns the status.
func devPairFrom(t testing.TB, s *server, code, xff string) int {
	req, _ := http.NewRequest("POST", devURL(s)+"/device", strings.NewReader(`{"name":"test"}`))
	req.Header.Set("Authorization", "Code "+code)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	res, err := devClient.Do(req)
	if err != nil {
		t.Errorf("pairing: %v", err)
		return 0
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	if res.StatusCode == 429 && res.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	return res.StatusCode
}

// devPairBurst sends n wrong codes at once (well-formed, 8 digits starting
// with 0000, which devPhone never hands out) and returns how many answers
// had each status.
func devPairBurst(t testing.TB, s *server, n int, xff string) map[int]int {
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st := devPairFrom(t, s, fmt.Sprintf("0000%04d", i), xff)
			mu.Lock()
			got[st]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

func isStatus(err error, status int) bool {
	var se *agent.StatusError
	return err != nil && errors.As(err, &se) && se.Status == status
}

func TestDeviceDelivery(t *testing.T) {
	t.Parallel()
	runShared(t, devArgs, []sharedCase{
		{"a message reaches the device and is delivered", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			_, number, code := devPhone(t, s, tn.Live, map[string]any{"sim_number": 1})
			a, _ := devAgent(t, s, code, agent.Options{}, true)
			to := msgAwake(t)
			before := time.Now()
			d := msgSend(t, s, tn.Live, map[string]any{"to": to, "body": "Your code is 1234", "channel": "auto"})
			if d["from"] != number || d["channel"] != "sms" {
				t.Errorf("send: %v, want from %s over sms (no phone sends chat)", d, number)
			}
			id := d["message_id"].(string)
			m := devHeld(t, a, id)
			if m.TextMessage == nil || m.TextMessage.Text != "Your code is 1234" || len(m.PhoneNumbers) != 1 || m.PhoneNumbers[0] != to ||
				m.WithDeliveryReport == nil || !*m.WithDeliveryReport || m.SimNumber == nil || *m.SimNumber != 1 || m.ValidUntil == nil ||
				m.ValidUntil.Before(before.Add(3*time.Second-time.Second)) || m.ValidUntil.After(time.Now().Add(4*time.Second)) || m.CreatedAt.IsZero() {
				t.Errorf("the message as the device got it: %+v", m)
			}
			got := msgWait(t, s, tn.Live, id, "delivered")
			if got["sent_at"] == nil || got["delivered_at"] == nil || got["failure_reason"] != nil {
				t.Errorf("delivered message: %v", got)
			}
			if n := a.SentCount(id); n != 1 {
				t.Errorf("the device sent the message %d times", n)
			}
			// A test send never reaches the device.
			td := msgSend(t, s, tn.Test, map[string]any{"to": to, "body": "test"})
			msgWait(t, s, tn.Test, td["message_id"].(string), "delivered")
			a.Pull(context.Background())
			if _, ok := a.Held()[td["message_id"].(string)]; ok {
				t.Errorf("a test message reached the device")
			}
			// auto with detection down goes by sms when no phone sends chat.
			if d := msgSend(t, s, tn.Live, map[string]any{"to": "+15005550003", "body": "x"}); d["channel"] != "sms" {
				t.Errorf("auto to the detection-down number: %v", d)
			}
		}},
		{"every state a device reports", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			_, _, code := devPhone(t, s, tn.Live, nil)
			var reg smsgateway.MobileRegisterResponse
			devCall(t, s, "POST", "/device", "Code "+code, smsgateway.MobileRegisterRequest{}, &reg)
			auth := "Bearer " + reg.Token
			send := func() string {
				return msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "x"})["message_id"].(string)
			}
			take := func(want ...string) {
				t.Helper()
				var msgs smsgateway.MobileGetMessagesResponse
				devCall(t, s, "GET", "/message", auth, nil, &msgs)
				var got []string
				for _, m := range msgs {
					got = append(got, m.ID)
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("GET /message: %v, want %v", got, want)
				}
			}
			report := func(id string, state smsgateway.ProcessingState, errText string, at time.Time) {
				t.Helper()
				var e *string
				if errText != "" {
					e = &errText
				}
				req := smsgateway.MobilePatchMessageRequest{{ID: id, State: state,
					Recipients: []smsgateway.RecipientState{{PhoneNumber: "x", State: state, Error: e}},
					States:     map[string]time.Time{string(state): at}}}
				if status := devCall(t, s, "PATCH", "/message", auth, req, nil); status != 204 {
					t.Fatalf("PATCH /message %s %s: %d", id, state, status)
				}
			}
			a, b, c := send(), send(), send()
			take(a, b, c)
			take(a, b, c) // taken, not reported on: handed again (the app deduplicates by id)
			// Processed: handed to Android, which may have sent it already.
			// (A time the phone gives is kept when it is after the message's
			// creation and not ahead of the server's clock.)
			created, _ := time.Parse(time.RFC3339Nano, msgGet(t, s, tn.Live, a)["created_at"].(string))
			sentAt := created.Truncate(time.Millisecond).Add(2 * time.Millisecond)
			eventually(t, 10*time.Second, "the clock to pass the report's time", func() bool { return time.Now().After(sentAt) })
			report(a, smsgateway.ProcessingStateProcessed, "", sentAt)
			take(b, c) // reported on: not again
			if m := msgGet(t, s, tn.Live, a); m["status"] != "sent" || m["sent_at"] != sentAt.Format("2006-01-02T15:04:05.999999Z") {
				t.Errorf("Processed: %v %v, want sent at %v", m["status"], m["sent_at"], sentAt)
			}
			report(a, smsgateway.ProcessingStateSent, "", time.Now())
			if m := msgGet(t, s, tn.Live, a); m["status"] != "sent" || m["sent_at"] != sentAt.Format("2006-01-02T15:04:05.999999Z") {
				t.Errorf("Sent after Processed: %v %v, want sent at the Processed time %v", m["status"], m["sent_at"], sentAt)
			}
			report(a, smsgateway.ProcessingStateDelivered, "", time.Now())
			m := msgGet(t, s, tn.Live, a)
			if m["status"] != "delivered" || m["sent_at"] != sentAt.Format("2006-01-02T15:04:05.999999Z") {
				t.Errorf("Delivered: %v", m)
			}
			// A repeat and a stale report change nothing.
			report(a, smsgateway.ProcessingStateDelivered, "", time.Now().Add(time.Hour))
			report(a, smsgateway.ProcessingStateSent, "", time.Now())
			report(a, smsgateway.ProcessingStateFailed, "late", time.Now())
			if again := msgGet(t, s, tn.Live, a); again["status"] != "delivered" || again["delivered_at"] != m["delivered_at"] || again["failure_reason"] != nil {
				t.Errorf("after a repeated and stale reports: %v, want %v", again, m)
			}
			// Failed, with the phone's reason.
			report(b, smsgateway.ProcessingStateFailed, "RESULT_ERROR_LIMIT_EXCEEDED", time.Now())
			if m := msgGet(t, s, tn.Live, b); m["status"] != "failed" || m["failure_reason"] != "RESULT_ERROR_LIMIT_EXCEEDED" || m["error_code"] != "DELIVERY_FAILED" || m["failed_at"] == nil {
				t.Errorf("Failed: %v", m)
			}
			// "TTL expired": the phone did not send it, and no other phone
			// can take it (the same device would report the same again).
			e := send()
			take(c, e)
			report(e, smsgateway.ProcessingStateFailed, "TTL expired", time.Now())
			if m := msgGet(t, s, tn.Live, e); m["status"] != "failed" || !strings.HasPrefix(m["failure_reason"].(string), "TTL expired") {
				t.Errorf("TTL expired on the only phone: %v", m)
			}
			// An unknown state is accepted and ignored; so is a report on a
			// message the device was never handed.
			report(c, smsgateway.ProcessingState("Exploded"), "", time.Now())
			d := send()
			report(d, smsgateway.ProcessingStateDelivered, "", time.Now())
			for _, id := range []string{c, d} {
				if m := msgGet(t, s, tn.Live, id); m["status"] != "queued" {
					t.Errorf("%s after an ignored report: %v", id, m["status"])
				}
			}
			// Bad bodies are refused in the app's error format.
			for _, body := range []string{`{"id": "x"}`, `[{"id": ""}]`, `not json`} {
				req, _ := http.NewRequest("PATCH", devURL(s)+"/message", strings.NewReader(body))
				req.Header.Set("Authorization", auth)
				res, err := devClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != 400 {
					t.Errorf("PATCH /message %s: %d, want 400", body, res.StatusCode)
				}
			}
		}},
		{"inbound texts", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			rc := newHookReceiver(t, nil)
			registerHook(t, s, tn.Live, rc.URL, "message.received")
			_, number, code := devPhone(t, s, tn.Live, nil)
			a, _ := devAgent(t, s, code, agent.Options{}, false)
			from := msgAwake(t)
			inbound := func() []map[string]any {
				return msgList(t, s, tn.Live, "direction=inbound&limit=100").List()
			}
			// A national number is read in the phone's own country.
			ev, err := a.Inbound(context.Background(), from, "STOP")
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Post(context.Background(), ev); err != nil { // the app's retry
				t.Fatal(err)
			}
			list := inbound()
			if len(list) != 1 || list[0]["from"] != from || list[0]["to"] != number || list[0]["body"] != "STOP" || list[0]["status"] != "received" {
				t.Fatalf("inbound after the text and its repeat: %v", list)
			}
			msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": from, "body": "x"}), 400, "RECIPIENT_OPTED_OUT", "")
			eventually(t, 30*time.Second, "message.received", func() bool { return rc.count() >= 1 })
			if p := rc.requests()[0].payload(t); p["event"] != "message.received" || p["message_id"] != list[0]["id"] || p["body"] != "STOP" {
				t.Errorf("webhook: %v", p)
			}
			if _, err := a.Inbound(context.Background(), from, "start"); err != nil {
				t.Fatal(err)
			}
			a.Pull(context.Background()) // keep the phone online
			msgSend(t, s, tn.Live, map[string]any{"to": from, "body": "welcome back"})
			// A forged callback stores nothing.
			forged, _ := json.Marshal(agent.Event{ID: "forged", Event: "sms:received", Payload: map[string]any{"sender": from, "message": "STOP"}})
			res, err := devClient.Post(devURL(s)+"/inbound/0123456789abcdef0123456789abcdef01234567", "application/json", bytes.NewReader(forged))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 401 {
				t.Errorf("forged inbound: %d, want 401", res.StatusCode)
			}
			if l := inbound(); len(l) != 2 {
				t.Errorf("%d inbound messages after the forged one, want 2: %v", len(l), l)
			}
			msgSend(t, s, tn.Live, map[string]any{"to": from, "body": "still opted in"})
		}},
		{"the times of Android 5 and 6", func(t *testing.T, s *server, db string) {
			// The app on Android 5 and 6 writes the zone as "+" and the raw
			// offset's signed hours and minutes: New York +-5:00,
			// Newfoundland +-3:-30. Its reports and inbound texts are taken.
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			_, _, code := devPhone(t, s, tn.Live, nil)
			a, _ := devAgent(t, s, code, agent.Options{Hold: true}, false)
			id := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "x"})["message_id"].(string)
			if err := a.Pull(context.Background()); err != nil {
				t.Fatal(err)
			}
			created, _ := time.Parse(time.RFC3339Nano, msgGet(t, s, tn.Live, id)["created_at"].(string))
			at := created.Truncate(time.Millisecond).Add(2 * time.Millisecond)
			eventually(t, 10*time.Second, "the clock to pass the report's time", func() bool { return time.Now().After(at) })
			newYork := at.In(time.FixedZone("", -5*3600)).Format("2006-01-02T15:04:05.000") + "+-5:00"
			newfoundland := at.Add(time.Millisecond).In(time.FixedZone("", -(3*3600+1800))).Format("2006-01-02T15:04:05.000") + "+-3:-30"
			patch := []map[string]any{{"id": id, "state": "Sent",
				"recipients": []map[string]any{{"phoneNumber": "x", "state": "Sent"}},
				"states":     map[string]string{"Processed": newYork, "Sent": newfoundland}}}
			if status := devCall(t, s, "PATCH", "/message", "Bearer "+a.Token, patch, nil); status != 204 {
				t.Fatalf("PATCH /message with %s: %d", newYork, status)
			}
			if m := msgGet(t, s, tn.Live, id); m["status"] != "sent" || m["sent_at"] != at.UTC().Format("2006-01-02T15:04:05.999999Z") {
				t.Errorf("reported with Android 5 times: %v sent at %v, want sent at %v", m["status"], m["sent_at"], at)
			}
			// An unreadable time is the time of receipt.
			before := time.Now()
			patch[0]["state"], patch[0]["states"] = "Delivered", map[string]any{"Delivered": "at teatime", "Processed": 5}
			if status := devCall(t, s, "PATCH", "/message", "Bearer "+a.Token, patch, nil); status != 204 {
				t.Fatalf("PATCH /message with unreadable times: %d", status)
			}
			m := msgGet(t, s, tn.Live, id)
			delivered, _ := time.Parse(time.RFC3339Nano, m["delivered_at"].(string))
			if m["status"] != "delivered" || delivered.Before(before.Add(-time.Second)) || delivered.After(time.Now().Add(time.Second)) {
				t.Errorf("delivered with an unreadable time: %v at %v, want about %v", m["status"], m["delivered_at"], before)
			}
			// STOP from Newfoundland opts the sender out.
			from := msgAwake(t)
			ev := agent.Event{ID: "legacy-stop", Event: "sms:received", DeviceID: a.ID,
				Payload: map[string]any{"messageId": "m1", "sender": from, "message": "STOP", "receivedAt": newfoundland}}
			if err := a.Post(context.Background(), ev); err != nil {
				t.Fatalf("inbound STOP with %s: %v", newfoundland, err)
			}
			msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": from, "body": "x"}), 400, "RECIPIENT_OPTED_OUT", "")
		}},
		{"callbacks that cannot be used, and too many", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			_, _, code := devPhone(t, s, tn.Live, nil)
			a, _ := devAgent(t, s, code, agent.Options{}, false)
			hooks, err := a.Webhooks(context.Background())
			if err != nil || len(hooks) != 3 || hooks[0].Event != "sms:received" {
				t.Fatalf("webhooks: %v %v", hooks, err)
			}
			post := func(body string) *http.Response {
				t.Helper()
				res, err := devClient.Post(hooks[0].URL, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				return res
			}
			inbound := func() int { return len(msgList(t, s, tn.Live, "direction=inbound&limit=100").List()) }
			before := scrapeSeries(t, s.URL)
			// Answered 204 so that the app stops retrying, stored nowhere,
			// counted by reason.
			for reason, body := range map[string]string{
				"empty_text": `{"id":"e1","event":"sms:received","payload":{"sender":"+15551234567","message":"  "}}`,
				"bad_sender": `{"id":"e2","event":"sms:received","payload":{"sender":"` + strings.Repeat("9", 64) + `","message":"hi"}}`,
				"no_id":      `{"event":"sms:received","payload":{"sender":"+15551234567","message":"hi"}}`,
				"malformed":  `{"id":"e4","event":"sms:received","payload":"hi"}`,
			} {
				if res := post(body); res.StatusCode != 204 {
					t.Errorf("%s: %d, want 204", reason, res.StatusCode)
				}
			}
			for _, sender := range []string{"<script>alert(1)</script>", "=HYPERLINK(\"http://x\")", "ab"} {
				body, _ := json.Marshal(agent.Event{ID: "s" + sender, Event: "sms:received", Payload: map[string]any{"sender": sender, "message": "hi"}})
				if res := post(string(body)); res.StatusCode != 204 {
					t.Errorf("sender %q: %d, want 204", sender, res.StatusCode)
				}
			}
			if n := inbound(); n != 0 {
				t.Fatalf("%d inbound messages stored from unusable callbacks", n)
			}
			after := scrapeSeries(t, s.URL)
			for reason, want := range map[string]float64{"empty_text": 1, "bad_sender": 4, "no_id": 1, "malformed": 1} {
				series := `switchboard_device_inbound_dropped_total{reason="` + reason + `"}`
				if got := after[series] - before[series]; got != want {
					t.Errorf("%s: %v more, want %v", series, got, want)
				}
			}
			// An alphanumeric sender id is kept as it is.
			if _, err := a.Inbound(context.Background(), "AMAZON", "Your parcel"); err != nil {
				t.Fatal(err)
			}
			if l := msgList(t, s, tn.Live, "direction=inbound").List(); len(l) != 1 || l[0]["from"] != "AMAZON" {
				t.Fatalf("inbound from AMAZON: %v", l)
			}
			// 60 callbacks a minute per phone, with a burst of 60 (the 7
			// unusable ones and AMAZON's count): then 429 with Retry-After
			// (the app tries again later).
			start := time.Now()
			counted, stored := 8, 1
			var limited *http.Response
			for i := 0; limited == nil && i < 500; i++ {
				body, _ := json.Marshal(agent.Event{ID: fmt.Sprintf("burst-%d", i), Event: "sms:received",
					Payload: map[string]any{"sender": "+15551234567", "message": "hi"}})
				switch res := post(string(body)); res.StatusCode {
				case 204:
					counted++
					stored++
				case 429:
					limited = res
				default:
					t.Fatalf("text %d: %d", i, res.StatusCode)
				}
			}
			elapsed := time.Since(start)
			if limited == nil || limited.Header.Get("Retry-After") == "" {
				t.Fatalf("no 429 with Retry-After after %d callbacks", counted)
			}
			if max := 60 + int(elapsed/time.Second) + 1; counted < 60 || counted > max {
				t.Errorf("%d callbacks taken before the 429 in %v, want 60 to %d", counted, elapsed, max)
			}
			if n := inbound(); n != stored {
				t.Errorf("%d inbound messages stored, want %d", n, stored)
			}
		}},
		{"a phone goes offline", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			id, _, code := devPhone(t, s, tn.Live, nil)
			_, stop := devAgent(t, s, code, agent.Options{}, true)
			// The open stream keeps it online past --phone-offline-after.
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) {
				if p := phoneGet(t, s, tn.Live, id); p["status"] != "online" {
					t.Fatalf("with its stream open: %v", p)
				}
				time.Sleep(200 * time.Millisecond)
			}
			stop()
			eventually(t, 30*time.Second, "the phone to go offline", func() bool { return phoneGet(t, s, tn.Live, id)["status"] == "offline" })
			r := s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "x"})
			msgWantErr(t, r, 503, "NO_PHONE_AVAILABLE", "")
			// It may come back by itself: try again in a minute.
			if got := r.Header.Get("Retry-After"); got != "60" {
				t.Errorf("Retry-After %q with the only phone offline, want 60", got)
			}
		}},
		{"daily limit and pacing", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			msgAvoidMidnight(t)
			id, number, code := devPhone(t, s, tn.Live, map[string]any{"daily_limit": 3, "rate_limit": 1})
			var reg smsgateway.MobileRegisterResponse
			devCall(t, s, "POST", "/device", "Code "+code, smsgateway.MobileRegisterRequest{}, &reg)
			var ids []string
			for range 3 {
				ids = append(ids, msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "x"})["message_id"].(string))
			}
			r := s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "x", "from": number})
			msgWantErr(t, r, 503, "NO_PHONE_AVAILABLE", "")
			if !strings.Contains(r.Body["error"].(string), number) {
				t.Errorf("NO_PHONE_AVAILABLE for a named phone does not name it: %s", r.Raw)
			}
			if p := phoneGet(t, s, tn.Live, id); p["sent_today"] != 3.0 {
				t.Errorf("sent_today %v, want 3", p["sent_today"])
			}
			// One a minute: the device gets one message, then none.
			var msgs smsgateway.MobileGetMessagesResponse
			devCall(t, s, "GET", "/message", "Bearer "+reg.Token, nil, &msgs)
			if len(msgs) != 1 || msgs[0].ID != ids[0] {
				t.Fatalf("first take at 1 a minute: %v", msgs)
			}
			devCall(t, s, "PATCH", "/message", "Bearer "+reg.Token, smsgateway.MobilePatchMessageRequest{{ID: ids[0], State: smsgateway.ProcessingStateSent,
				Recipients: []smsgateway.RecipientState{{PhoneNumber: "x", State: smsgateway.ProcessingStateSent}}}}, nil)
			devCall(t, s, "GET", "/message", "Bearer "+reg.Token, nil, &msgs)
			if len(msgs) != 0 {
				t.Fatalf("second take within the minute: %v", msgs)
			}
			// Without the rate, the rest come at once.
			s.do(t, "PATCH", "/v1/phones/"+id, tn.Live, map[string]any{"rate_limit": nil})
			devCall(t, s, "GET", "/message", "Bearer "+reg.Token, nil, &msgs)
			if len(msgs) != 2 || msgs[0].ID != ids[1] || msgs[1].ID != ids[2] {
				t.Fatalf("take without a rate: %v", msgs)
			}
		}},
	})
}

// TestDeviceValidUntilMovesMessages: a message moves to another phone only
// with proof that it was not sent: its device never took it, or reported it
// Failed with "TTL expired".
func TestDeviceValidUntilMovesMessages(t *testing.T) {
	t.Parallel()
	runShared(t, devArgs, []sharedCase{
		{"a device that lost the hand-out fails it as TTL expired, and it moves", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			_, _, codeA := devPhone(t, s, tn.Live, nil)
			idB, numberB, codeB := devPhone(t, s, tn.Live, nil)
			var reg smsgateway.MobileRegisterResponse
			devCall(t, s, "POST", "/device", "Code "+codeA, smsgateway.MobileRegisterRequest{}, &reg)
			b := agentPairedOffline(t, s, tn, idB, codeB)
			devCall(t, s, "GET", "/device", "Bearer "+reg.Token, nil, nil) // A is seen: online, B not
			id := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "x"})["message_id"].(string)
			// A's device takes it, and the answer never reaches the app.
			var msgs smsgateway.MobileGetMessagesResponse
			if devCall(t, s, "GET", "/message", "Bearer "+reg.Token, nil, &msgs); len(msgs) != 1 || msgs[0].ID != id {
				t.Fatalf("A took %v", msgs)
			}
			validUntil := *msgs[0].ValidUntil
			devRun(t, b, true)
			eventually(t, 30*time.Second, "validUntil to pass", func() bool { return time.Now().After(validUntil) })
			// The app asks again: it is handed the message with its first
			// validUntil, does not know it, and fails it unsent.
			a := agent.New(agent.Options{URL: devURL(s)}, reg.Id, reg.Token)
			devRun(t, a, true)
			m := msgWait(t, s, tn.Live, id, "delivered")
			if m["from"] != numberB || a.SentCount(id) != 0 || b.SentCount(id) != 1 || a.State(id) != smsgateway.ProcessingStateFailed {
				t.Errorf("delivered from %v; sent %d times by A (state %s) and %d by B; want from B, 0 and 1",
					m["from"], a.SentCount(id), a.State(id), b.SentCount(id))
			}
			if got := a.Held()[id].ValidUntil; got == nil || !got.Equal(validUntil) {
				t.Errorf("handed again with validUntil %v, want the first %v", got, validUntil)
			}
		}},
		{"a TTL expired report moves the message", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			_, _, codeA := devPhone(t, s, tn.Live, nil)
			idB, numberB, codeB := devPhone(t, s, tn.Live, nil)
			var reg smsgateway.MobileRegisterResponse
			devCall(t, s, "POST", "/device", "Code "+codeA, smsgateway.MobileRegisterRequest{}, &reg)
			b := agentPairedOffline(t, s, tn, idB, codeB)
			var msgs smsgateway.MobileGetMessagesResponse
			devCall(t, s, "GET", "/device", "Bearer "+reg.Token, nil, nil)
			id := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "x"})["message_id"].(string)
			if devCall(t, s, "GET", "/message", "Bearer "+reg.Token, nil, &msgs); len(msgs) != 1 || msgs[0].ID != id {
				t.Fatalf("the first phone took %v", msgs)
			}
			devRun(t, b, true)
			eventually(t, 30*time.Second, "the second phone online", func() bool { return phoneGet(t, s, tn.Live, idB)["status"] == "online" })
			expired := "TTL expired"
			devCall(t, s, "PATCH", "/message", "Bearer "+reg.Token, smsgateway.MobilePatchMessageRequest{{ID: id, State: smsgateway.ProcessingStateFailed,
				Recipients: []smsgateway.RecipientState{{PhoneNumber: "x", State: smsgateway.ProcessingStateFailed, Error: &expired}}}}, nil)
			if m := msgWait(t, s, tn.Live, id, "delivered"); m["from"] != numberB || b.SentCount(id) != 1 {
				t.Errorf("after TTL expired on the first phone: %v, sent %d times by the second", m, b.SentCount(id))
			}
		}},
		{"deleting a phone moves its messages", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			idA, _, codeA := devPhone(t, s, tn.Live, nil)
			idB, numberB, codeB := devPhone(t, s, tn.Live, nil)
			var reg smsgateway.MobileRegisterResponse
			devCall(t, s, "POST", "/device", "Code "+codeA, smsgateway.MobileRegisterRequest{}, &reg)
			b := agentPairedOffline(t, s, tn, idB, codeB)
			devCall(t, s, "GET", "/device", "Bearer "+reg.Token, nil, nil) // A is seen: online, B not
			var ids []string
			for range 3 {
				ids = append(ids, msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "x"})["message_id"].(string))
			}
			devRun(t, b, true)
			s.do(t, "DELETE", "/v1/phones/"+idA, tn.Live, nil)
			for _, id := range ids {
				if m := msgWait(t, s, tn.Live, id, "delivered"); m["from"] != numberB {
					t.Errorf("%s delivered from %v, want %s", id, m["from"], numberB)
				}
			}
		}},
	})
}

// devOutcomeArgs are devArgs with a message a device took and never
// reported on failing 8 s after its validUntil and grace (3 s + 1.5 s).
var devOutcomeArgs = append(slices.Clone(devArgs), "--device-outcome-after", "8s")

// TestDeviceNeverSentTwice: a message a device took never goes out from
// another phone, on SQLite and PostgreSQL (see devNeverSentTwice).
func TestDeviceNeverSentTwice(t *testing.T) {
	t.Parallel()
	runShared(t, devOutcomeArgs, []sharedCase{
		{"two phones", func(t *testing.T, s *server, db string) { devNeverSentTwice(t, db, s, s) }},
	})
}

// TestDeviceNeverSentTwiceTwoNodes: the same with two nodes sharing
// PostgreSQL, each sweeping: the phone that takes the messages is connected
// to one node, the phone that must never get them to the other.
func TestDeviceNeverSentTwiceTwoNodes(t *testing.T) {
	t.Parallel()
	db := postgresURL(t)
	devNeverSentTwice(t, db, startServer(t, db, devOutcomeArgs...), startServer(t, db, devOutcomeArgs...))
}

// devNeverSentTwice plays two real phones' bad days beside a third phone
// that is online and asks for messages all along, and must never be given
// them. A reports Processed and loses its data connection at once (the
// app's Sent and Delivered reports stay on the phone): its message is sent,
// and stays A's past validUntil, its grace and --device-outcome-after; A's
// late reports land when it is back. C takes a message and goes silent: it
// is handed the message again, with its first validUntil, when it is back,
// and as it never reports on it, the message fails as outcome unknown,
// with message.failed. Phones A and C are served by node s1, B by s2.
func devNeverSentTwice(t *testing.T, db string, s1, s2 *server) {
	tn := msgTenant(t, db)
	devOnlyAndroid(t, s1, tn)
	rc := newHookReceiver(t, nil)
	registerHook(t, s1, tn.Live, rc.URL, "message.failed")
	idA, numberA, codeA := devPhone(t, s1, tn.Live, nil)
	idB, _, codeB := devPhone(t, s1, tn.Live, nil)
	idC, numberC, codeC := devPhone(t, s1, tn.Live, nil)
	a, _ := devAgent(t, s1, codeA, agent.Options{SilentAfter: smsgateway.ProcessingStateProcessed}, true)
	// B and C paired and not running: offline once --phone-offline-after
	// has passed, which they wait out together.
	b, c := agentPaired(t, s2, codeB), agentPaired(t, s1, codeC, agent.Options{Hold: true})
	devWaitOffline(t, s2, tn, idB)
	devWaitOffline(t, s1, tn, idC)

	// A takes the first message, reports Processed and goes silent.
	first := msgSend(t, s1, tn.Live, map[string]any{"to": msgAwake(t), "body": "first"})["message_id"].(string)
	eventually(t, 30*time.Second, "A to report Processed and go silent", a.Silent)
	m := msgGet(t, s1, tn.Live, first)
	if m["status"] != "sent" || m["from"] != numberA || m["sent_at"] == nil {
		t.Fatalf("reported Processed: %v, want sent from A", m)
	}
	sentAt := m["sent_at"]
	eventually(t, 30*time.Second, "A to go offline", func() bool { return phoneGet(t, s1, tn.Live, idA)["status"] == "offline" })

	// C takes the second and goes silent.
	devRun(t, c, true)
	eventually(t, 30*time.Second, "C online", func() bool { return phoneGet(t, s1, tn.Live, idC)["status"] == "online" })
	second := msgSend(t, s1, tn.Live, map[string]any{"to": msgAwake(t), "body": "second"})["message_id"].(string)
	validUntil := *devHeld(t, c, second).ValidUntil
	c.SetSilent(true)

	// B comes online and asks for messages all along.
	devRun(t, b, true)
	eventually(t, 30*time.Second, "B online", func() bool { return phoneGet(t, s2, tn.Live, idB)["status"] == "online" })

	// Past validUntil and its grace, C is back: it is handed the second
	// message again, with its first validUntil.
	grace := 1500 * time.Millisecond
	eventually(t, 30*time.Second, "validUntil and its grace to pass", func() bool { return time.Now().After(validUntil.Add(grace)) })
	c.SetSilent(false)
	eventually(t, 30*time.Second, "C to be handed the message again", func() bool { return len(c.Offers(second)) > 0 })
	for _, v := range c.Offers(second) {
		if !v.Equal(validUntil) {
			t.Errorf("handed again with validUntil %v, want the first %v", v, validUntil)
		}
	}
	// It never reports: the message fails as outcome unknown, naming C.
	failed := msgWait(t, s1, tn.Live, second, "failed")
	reason, _ := failed["failure_reason"].(string)
	if !strings.HasPrefix(reason, "outcome unknown: ") || !strings.Contains(reason, numberC) || failed["error_code"] != "DELIVERY_FAILED" ||
		failed["from"] != numberC || failed["sent_at"] != nil {
		t.Errorf("the silent phone's message: %v", failed)
	}
	if at, _ := time.Parse(time.RFC3339Nano, failed["failed_at"].(string)); at.Before(validUntil.Add(grace + 8*time.Second)) {
		t.Errorf("failed at %v, before validUntil %v + %v grace + 8s", at, validUntil, grace)
	}
	eventually(t, 30*time.Second, "message.failed", func() bool {
		for _, r := range rc.requests() {
			if p := r.payload(t); p["message_id"] == second {
				return p["event"] == "message.failed" && p["failure_reason"] == reason && p["error_code"] == "DELIVERY_FAILED"
			}
		}
		return false
	})

	// The first message's validUntil, grace and outcome wait are long
	// past (it was taken before the second): it is still A's, sent.
	if m := msgGet(t, s1, tn.Live, first); m["status"] != "sent" || m["from"] != numberA || m["sent_at"] != sentAt {
		t.Errorf("the message A reported Processed: %v, want still sent from A at %v", m, sentAt)
	}
	for _, id := range []string{first, second} {
		if _, ok := b.Held()[id]; ok {
			t.Errorf("B was handed %s", id)
		}
	}
	// A is back: its late reports land.
	a.SetSilent(false)
	m = msgWait(t, s1, tn.Live, first, "delivered")
	if m["from"] != numberA || m["sent_at"] != sentAt {
		t.Errorf("after A's late reports: %v, want delivered from A, sent at %v", m, sentAt)
	}
	if a.SentCount(first) != 1 || b.SentCount(first) != 0 || c.SentCount(second) != 0 || b.SentCount(second) != 0 {
		t.Errorf("sent counts: first %d by A and %d by B, second %d by C and %d by B; want 1, 0, 0, 0",
			a.SentCount(first), b.SentCount(first), c.SentCount(second), b.SentCount(second))
	}
}

// agentPairedOffline pairs a reference device (with the options opt, if
// given) with the phone id and waits until the phone is offline (its device
// not running): it can then take messages only once it runs.
func agentPairedOffline(t testing.TB, s *server, tn tenant, id, code string, opt ...agent.Options) *agent.Agent {
	t.Helper()
	a := agentPaired(t, s, code, opt...)
	devWaitOffline(t, s, tn, id)
	return a
}

// agentPaired pairs a reference device (with the options opt, if given)
// with code, and does not run it.
func agentPaired(t testing.TB, s *server, code string, opt ...agent.Options) *agent.Agent {
	t.Helper()
	o := agent.Options{}
	if len(opt) > 0 {
		o = opt[0]
	}
	o.URL = devURL(s)
	a, err := agent.Pair(context.Background(), o, code)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// devWaitOffline waits until the phone id is offline.
func devWaitOffline(t testing.TB, s *server, tn tenant, id string) {
	t.Helper()
	eventually(t, 30*time.Second, "the paired phone to go offline", func() bool { return phoneGet(t, s, tn.Live, id)["status"] == "offline" })
}

// TestDeviceTwoNodes: on PostgreSQL, a message accepted on one node reaches
// a device whose stream another node holds.
func TestDeviceTwoNodes(t *testing.T) {
	t.Parallel()
	db := postgresURL(t)
	nodeA := startServer(t, db, devArgs...)
	nodeB := startServer(t, db, devArgs...)
	tn := msgTenant(t, db)
	devOnlyAndroid(t, nodeA, tn)
	_, _, code := devPhone(t, nodeA, tn.Live, nil)
	b, _ := devAgent(t, nodeB, code, agent.Options{}, true)
	eventually(t, 30*time.Second, "the stream on node B", b.Connected)
	sent := time.Now()
	id := msgSend(t, nodeA, tn.Live, map[string]any{"to": msgAwake(t), "body": "across nodes"})["message_id"].(string)
	devHeld(t, b, id)
	t.Logf("accepted on node A, taken by the device on node B %v later", time.Since(sent))
	msgWait(t, nodeA, tn.Live, id, "delivered")
}

// TestDeviceAutoIsSMS: a live tenant whose only phone is an Android phone,
// on a server with no chat engine, gets channel auto (the default) resolved
// to sms, for a send and for a campaign alike: the simulator's detection
// (which says chat for most numbers) is for test traffic and tenants with
// only simulated phones. A campaign message resolved to chat found no
// phone to take it and waited.
func TestDeviceAutoIsSMS(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, devArgs...)
		tn := msgTenant(t, db)
		devOnlyAndroid(t, s, tn)
		_, _, code := devPhone(t, s, tn.Live, nil)
		a, _ := devAgent(t, s, code, agent.Options{}, true)
		eventually(t, 30*time.Second, "the device's stream", a.Connected)
		to := msgAwake(t)
		id := msgSend(t, s, tn.Live, map[string]any{"to": to, "body": "a single send"})["message_id"].(string)
		devHeld(t, a, id)
		if m := msgWait(t, s, tn.Live, id, "delivered"); m["channel"] != "sms" {
			t.Errorf("a send without channel: %v, want channel sms", m["channel"])
		}
		c := cmpCreate(t, s, tn.Live, map[string]any{"name": "auto", "body": "a campaign", "to": []string{to}})["id"].(string)
		cmpLaunch(t, s, tn.Live, c)
		var held string
		eventually(t, 30*time.Second, "the device to take the campaign's message", func() bool {
			for mid, m := range a.Held() {
				if m.TextMessage != nil && m.TextMessage.Text == "a campaign" {
					held = mid
				}
			}
			return held != ""
		})
		if m := msgWait(t, s, tn.Live, held, "delivered"); m["channel"] != "sms" || m["campaign_id"] != c {
			t.Errorf("the campaign's message: %v, want channel sms", m)
		}
	})
}

// TestDeviceCrashLosesNothing: the server is killed with SIGKILL while a
// device is taking and reporting messages; started again on the same
// database (and address), every accepted message reaches the device and is
// delivered, none is sent twice.
func TestDeviceCrashLosesNothing(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		tn := newTenant(t, db, "--plan", "scale")
		addr := freeAddr(t)
		args := []string{"--addr", addr, "--phone-offline-after", "1m", "--device-valid-for", "1m"}
		p := startProcess(t, db, args...)
		s := &server{t: t, URL: p.URL, DB: db}
		devOnlyAndroid(t, s, tn)
		_, _, code := devPhone(t, s, tn.Live, nil)
		a, _ := devAgent(t, s, code, agent.Options{}, true)
		var ids []string
		for range 30 {
			ids = append(ids, msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "x"})["message_id"].(string))
		}
		p.kill() // some delivered, some taken and reported on in part, some waiting
		p = startProcess(t, db, args...)
		for _, id := range ids {
			msgWait(t, s, tn.Live, id, "delivered")
			if n := a.SentCount(id); n != 1 {
				t.Errorf("%s was sent %d times", id, n)
			}
		}
	})
}

// freeAddr returns a loopback address with a port that was free a moment
// ago, for a server that must come back at the same address.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestDeviceOverTLS: with --tls-cert and --tls-key the service speaks
// HTTPS (the app refuses plain HTTP), a device pairs and takes its messages
// over it, and the URLs handed to devices are under --public-url.
func TestDeviceOverTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSignedCert(t)
	s := startServer(t, sqliteURL(t), append([]string{"--tls-cert", certFile, "--tls-key", keyFile,
		"--public-url", "https://sms.example.com:8443"}, devArgs...)...)
	if !strings.HasPrefix(s.URL, "https://") {
		t.Fatalf("server URL %s, want https", s.URL)
	}
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	tn := msgTenant(t, s.DB)
	devOnlyAndroid(t, s, tn)
	_, _, code := devPhone(t, s, tn.Live, nil)
	a, _ := devAgent(t, s, code, agent.Options{HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}, true)
	hooks, err := a.Webhooks(context.Background())
	if err != nil || len(hooks) != 3 || !strings.HasPrefix(hooks[0].URL, "https://sms.example.com:8443/api/mobile/v1/inbound/") {
		t.Fatalf("webhooks: %+v %v", hooks, err)
	}
	id := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "over TLS"})["message_id"].(string)
	msgWait(t, s, tn.Live, id, "delivered")
	// What the node tells its operator (counted once the device's answer
	// is written, just after the message became delivered).
	for _, line := range []string{"switchboard_device_messages_handed_total 1", `switchboard_device_reports_total{state="Delivered"} 1`,
		`switchboard_device_reports_total{state="Sent"} 1`, `switchboard_device_pairings_total{result="paired"} 1`, "switchboard_device_streams 1"} {
		eventually(t, 10*time.Second, "/metrics to say "+line, func() bool {
			res, err := s.client.Get(s.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			metrics, _ := io.ReadAll(res.Body)
			res.Body.Close()
			return strings.Contains(string(metrics), "\n"+line+"\n")
		})
	}
	// Plain HTTP is not served.
	if res, err := devClient.Get("http" + strings.TrimPrefix(s.URL, "https") + "/healthz"); err == nil {
		if res.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP answered 200")
		}
		res.Body.Close()
	}
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key, and
// returns their files and a pool that trusts the certificate.
func selfSignedCert(t testing.TB) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "switchboard test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestPhoneAgentCommand runs `switchboard phone-agent` as a person would:
// it pairs with the code, sends what the phone is given, turns a line of
// its input into an inbound text, and with --state comes back after a
// restart without a new code or its URL.
func TestPhoneAgentCommand(t *testing.T) {
	t.Parallel()
	s := startServer(t, sqliteURL(t), devArgs...)
	tn := msgTenant(t, s.DB)
	devOnlyAndroid(t, s, tn)
	_, number, code := devPhone(t, s, tn.Live, nil)
	state := filepath.Join(t.TempDir(), "agent.json")
	start := func(args ...string) (out *syncBuffer, in io.WriteCloser, stop func() error) {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		out = &syncBuffer{}
		done := make(chan error, 1)
		go func() {
			done <- phoneAgentCmd(ctx, append([]string{"--state", state}, args...), noEnv, pr, out, io.Discard)
		}()
		eventually(t, 30*time.Second, "the agent to pair", func() bool {
			select {
			case err := <-done:
				t.Fatalf("phone-agent %s: %v", strings.Join(args, " "), err)
			default:
			}
			return strings.Contains(out.String(), `"status":"paired"`)
		})
		return out, pw, func() error { cancel(); pw.Close(); return <-done }
	}
	out, in, stop := start("--url", devURL(s), "--code", code)
	id := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "from the agent"})["message_id"].(string)
	msgWait(t, s, tn.Live, id, "delivered")
	if !strings.Contains(out.String(), `"sent":"`+id+`"`) {
		t.Errorf("the agent did not print the message it sent: %s", out.String())
	}
	from := msgAwake(t)
	io.WriteString(in, from+" STOP\n")
	eventually(t, 30*time.Second, "the inbound STOP", func() bool {
		list := msgList(t, s, tn.Live, "direction=inbound").List()
		return len(list) == 1 && list[0]["from"] == from && list[0]["to"] == number && list[0]["body"] == "STOP"
	})
	// Commands: a battery level its ping reports, sends that fail.
	io.WriteString(in, "!battery 9\n")
	eventually(t, 30*time.Second, "the ping of a battery at 9%", func() bool {
		for _, p := range s.do(t, "GET", "/v1/phones", tn.Live, nil).List() {
			if h, _ := p["health"].(map[string]any); h != nil && h["battery_level"] == 9.0 {
				return true
			}
		}
		return false
	})
	io.WriteString(in, "!fail on\n")
	eventually(t, 30*time.Second, "the command", func() bool { return strings.Contains(out.String(), `"done":"!fail on"`) })
	id = msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "fails"})["message_id"].(string)
	if m := msgWait(t, s, tn.Live, id, "failed"); m["failure_reason"] != agent.FailError {
		t.Errorf("a send with !fail on: %v", m["failure_reason"])
	}
	io.WriteString(in, "!fail off\n")
	// Cancel on the phone: a campaign message it holds Pending (!pause on)
	// is withdrawn from it when the campaign is canceled.
	io.WriteString(in, "!pause on\n")
	eventually(t, 30*time.Second, "the command", func() bool { return strings.Contains(out.String(), `"done":"!pause on"`) })
	c := cmpCreate(t, s, tn.Live, map[string]any{"name": "sale", "body": "sale", "channel": "sms", "to": []string{msgAwake(t)}})["id"].(string)
	cmpLaunch(t, s, tn.Live, c)
	eventually(t, 30*time.Second, "the device to hold the campaign's message", func() bool {
		return dbtest.Count(t, s.DB, `SELECT COUNT(*) FROM messages WHERE campaign_id = ? AND device_id IS NOT NULL`, c) == 1
	})
	if r := s.do(t, "POST", "/v1/campaigns/"+c+"/cancel", tn.Live, nil); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Raw)
	}
	canceled := regexp.MustCompile(`"canceled":"([0-9A-Z]+)"`)
	eventually(t, 30*time.Second, "the agent to cancel the message", func() bool { return canceled.MatchString(out.String()) })
	id = canceled.FindStringSubmatch(out.String())[1]
	if m := msgWait(t, s, tn.Live, id, "failed"); m["error_code"] != "CAMPAIGN_CANCELED" || m["campaign_id"] != c {
		t.Errorf("the message the phone withdrew: %v", m)
	}
	io.WriteString(in, "!pause off\n")
	if err := stop(); err != nil {
		t.Fatalf("phone-agent: %v", err)
	}
	// Again, with the pairing it kept: no code, no URL.
	_, _, stop = start()
	id = msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "after a restart"})["message_id"].(string)
	msgWait(t, s, tn.Live, id, "delivered")
	if err := stop(); err != nil {
		t.Fatalf("phone-agent: %v", err)
	}
	// Without a code or a kept pairing it says what is missing.
	var errOut bytes.Buffer
	if err := phoneAgentCmd(context.Background(), []string{"--url", devURL(s)}, noEnv, strings.NewReader(""), io.Discard, &errOut); err == nil || !strings.Contains(err.Error(), "--code") {
		t.Errorf("phone-agent without a code: %v", err)
	}
}

// TestDeviceSuspendedTenant: a suspended tenant's device gets nothing: its
// event stream ends, GET /message answers 403 and hands out none of its
// queued messages, and an inbound text is refused (403: the app posts it
// again later) and stored once the tenant is resumed; a trial that ended
// does the same.
func TestDeviceSuspendedTenant(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, devArgs...)
		tn := msgTenant(t, db)
		devOnlyAndroid(t, s, tn)
		_, number, code := devPhone(t, s, tn.Live, nil)
		a, _ := devAgent(t, s, code, agent.Options{}, false)
		ctx := context.Background()
		if _, err := a.Webhooks(ctx); err != nil {
			t.Fatal(err)
		}
		a.Pull(ctx) // online
		id := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "queued", "from": number})["message_id"].(string)

		streamEnded := make(chan struct{})
		req, _ := http.NewRequest("GET", devURL(s)+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+a.Token)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("events: %v %v", res, err)
		}
		go func() { io.Copy(io.Discard, res.Body); res.Body.Close(); close(streamEnded) }()

		cli(t, db, "tenant", "suspend", tn.ID)
		eventually(t, operatorChange, "GET /message to answer 403", func() bool {
			return devCall(t, s, "GET", "/message", "Bearer "+a.Token, nil, nil) == 403
		})
		select {
		case <-streamEnded:
		case <-time.After(10 * time.Second): // a beat (under a second here) after the tenant's cache
			t.Error("the event stream of a suspended tenant's phone stayed open")
		}
		ev, err := a.Inbound(ctx, msgAwake(t), "while suspended")
		if !isStatus(err, 403) {
			t.Errorf("an inbound text while suspended: %v, want 403", err)
		}
		if len(a.Held()) != 0 {
			t.Errorf("the device holds %v while its tenant is suspended", a.Held())
		}

		cli(t, db, "tenant", "resume", tn.ID)
		eventually(t, operatorChange, "the device to work again", func() bool { return a.Post(ctx, ev) == nil })
		if err := a.Pull(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := a.Held()[id]; !ok {
			t.Errorf("the queued message after the tenant was resumed: not handed out (%v)", a.Held())
		}
		if l := msgList(t, s, tn.Live, "direction=inbound").List(); len(l) != 1 || l[0]["body"] != "while suspended" {
			t.Errorf("inbound after the resume: %v", l)
		}

		cli(t, db, "tenant", "plan", tn.ID, "trial")
		cli(t, db, "tenant", "trial", tn.ID, "--ends", time.Now().Add(-time.Minute).Format(time.RFC3339))
		eventually(t, operatorChange, "GET /message to answer 403 after the trial", func() bool {
			return devCall(t, s, "GET", "/message", "Bearer "+a.Token, nil, nil) == 403
		})
	})
}

// TestPhoneAgentSafety: phone-agent refuses plain http to anything but a
// loopback address (its token would cross the network in the clear), and a
// state file left readable by others (it holds the token) is closed down to
// 0600 when read, as a new one is written.
func TestPhoneAgentSafety(t *testing.T) {
	t.Parallel()
	for url, ok := range map[string]bool{
		"http://sms.example.com/api/mobile/v1":              false,
		"http://10.0.0.5:8080/api/mobile/v1":                false,
		"ftp://sms.example.com/api/mobile/v1":               false,
		"sms.example.com/api/mobile/v1":                     false,
		"https://sms.example.com/api/mobile/v1":             true,
		"https://sms.example.com/api/mobile/v1/":            true,
		"https://sms.example.com/switchboard/api/mobile/v1": true, // behind a proxy's prefix
		"http://127.0.0.1:8080/api/mobile/v1":               true,
		"http://[::1]:8080/api/mobile/v1":                   true,
		"http://localhost:8080/api/mobile/v1":               true,
		"http://127.0.0.1:8080":                             false,
		"https://sms.example.com/":                          false,
		"https://sms.example.com/api/mobile":                false,
		"https://sms.example.com/api/mobile/v1/device":      false,
		"https://sms.example.com/api/mobile/v1?x=1":         false,
	} {
		if err := checkAgentURL(url); (err == nil) != ok {
			t.Errorf("--url %s: %v, want accepted %v", url, err, ok)
		}
	}
	// The server's own address: the error says what to type.
	if err := checkAgentURL("http://127.0.0.1:8080"); err == nil || !strings.Contains(err.Error(), "try http://127.0.0.1:8080/api/mobile/v1") {
		t.Errorf("--url without the device API's path: %v, want the URL to try", err)
	}
	var errOut bytes.Buffer
	if err := phoneAgentCmd(context.Background(), []string{"--code", "12345678"}, noEnv, strings.NewReader(""), io.Discard, &errOut); err == nil ||
		!strings.Contains(err.Error(), "--url is required") {
		t.Errorf("phone-agent without --url or --state: %v", err)
	}
	// --help tells what can be typed into it.
	var help bytes.Buffer
	if err := run(context.Background(), []string{"phone-agent", "--help"}, noEnv, &help, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, typed := range []string{"Typed on its standard input", "NUMBER TEXT", "!battery N", "!network wifi|cellular|none", "!fail on|off", "!ping"} {
		if !strings.Contains(help.String(), typed) {
			t.Errorf("phone-agent --help does not show %q:\n%s", typed, help.String())
		}
	}
	err := phoneAgentCmd(context.Background(), []string{"--url", "http://sms.example.com/api/mobile/v1", "--code", "12345678"}, noEnv, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "https://") {
		t.Errorf("phone-agent over plain http to another host: %v", err)
	}

	s := startServer(t, sqliteURL(t), devArgs...)
	tn := msgTenant(t, s.DB)
	_, _, code := devPhone(t, s, tn.Live, nil)
	state := filepath.Join(t.TempDir(), "agent.json")
	if err := os.WriteFile(state, []byte(`{}`), 0o644); err != nil { // left by an earlier version, open to others
		t.Fatal(err)
	}
	if _, err := loadAgent(context.Background(), agent.Options{URL: devURL(s)}, code, state); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the state file after pairing: %v %v, want mode 0600", fi.Mode(), err)
	}
	os.Chmod(state, 0o640)
	if _, err := loadAgent(context.Background(), agent.Options{URL: devURL(s)}, "", state); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(state); fi.Mode().Perm() != 0o600 {
		t.Errorf("a state file open to others after it was read: %v", fi.Mode())
	}
}
