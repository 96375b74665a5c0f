package client_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/client"
)

// TestVerifyRealDeliveries verifies the deliveries the real server makes,
// of all three events, with both signatures, and parses them.
func TestVerifyRealDeliveries(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	tn := newTenant(t)
	c := newClient(t, tn.Test)
	const secret = "a-long-random-secret-you-keep"
	verifier := &client.WebhookVerifier{Secret: secret}

	type got struct {
		ev     *client.Event
		err    error
		sigErr error
		req    hookReq
	}
	var mu sync.Mutex
	var deliveries []got
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		ev, err := verifier.ReadEvent(r)
		g := got{ev: ev, err: err, sigErr: client.VerifySignature(secret, body, r.Header.Get(client.HeaderSignature)),
			req: hookReq{header: r.Header.Clone(), body: body, at: time.Now()}}
		mu.Lock()
		deliveries = append(deliveries, g)
		mu.Unlock()
		if err != nil {
			http.Error(w, "invalid delivery", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	must(c.CreateWebhook(ctx, client.CreateWebhookParams{URL: sink.URL, Secret: secret,
		Events: []client.EventType{client.EventMessageDelivered, client.EventMessageFailed, client.EventMessageReceived}}))(t)

	start := time.Now()
	ok := must(c.SendMessage(ctx, client.SendParams{To: "+15005550000", Body: "Your order has shipped", Channel: client.ChannelSMS}))(t)
	bad := must(c.SendMessage(ctx, client.SendParams{To: "+15005550001", Body: "This one fails", Channel: client.ChannelSMS}))(t)
	in := must(c.SimulateInboundMessage(ctx, client.InboundParams{From: "+15005550008", Body: "hello"}))(t)
	byMessage := map[string]got{}
	waitFor(t, 30*time.Second, "three deliveries", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range deliveries {
			if d.err != nil || d.sigErr != nil {
				return false, errors.Join(d.err, d.sigErr)
			}
			byMessage[d.ev.MessageID] = d
		}
		return len(byMessage) == 3, nil
	})

	for _, tc := range []struct {
		id   string
		want client.Event
	}{
		{ok.MessageID, client.Event{Type: client.EventMessageDelivered, MessageID: ok.MessageID, From: tn.PhoneNumber, To: "+15005550000", Channel: client.ChannelSMS}},
		{bad.MessageID, client.Event{Type: client.EventMessageFailed, MessageID: bad.MessageID, From: tn.PhoneNumber, To: "+15005550001", Channel: client.ChannelSMS,
			FailureReason: "simulated carrier rejection", ErrorCode: client.CodeDeliveryFailed}},
		{in.ID, client.Event{Type: client.EventMessageReceived, MessageID: in.ID, From: "+15005550008", To: tn.PhoneNumber, Channel: client.ChannelSMS, Body: "hello"}},
	} {
		d := byMessage[tc.id]
		ev := *d.ev
		if ev.DeliveryID == "" || ev.DeliveryID != d.req.header.Get(client.HeaderDelivery) || string(ev.Type) != d.req.header.Get(client.HeaderEvent) {
			t.Fatalf("delivery id %q, headers %v", ev.DeliveryID, d.req.header)
		}
		near(t, "timestamp", ev.Timestamp, start, 30*time.Second)
		tc.want.DeliveryID, tc.want.Timestamp = ev.DeliveryID, ev.Timestamp
		if ev != tc.want {
			t.Fatalf("event %+v, want %+v", ev, tc.want)
		}

		// The same real delivery fails with a wrong secret, a changed
		// body, or as a replay later than the tolerance.
		h, body := d.req.header, d.req.body
		if err := client.VerifySignature("another-secret-0123", body, h.Get(client.HeaderSignature)); !errors.Is(err, client.ErrInvalidSignature) {
			t.Fatalf("wrong secret: %v", err)
		}
		tampered := bytes.Replace(body, []byte(tc.id), []byte(strings.ToLower(tc.id)), 1)
		if err := client.VerifySignature(secret, tampered, h.Get(client.HeaderSignature)); !errors.Is(err, client.ErrInvalidSignature) {
			t.Fatalf("tampered body: %v", err)
		}
		if err := (&client.WebhookVerifier{Secret: secret}).Verify(h, tampered); !errors.Is(err, client.ErrInvalidSignature) {
			t.Fatalf("tampered body, standard: %v", err)
		}
		if err := (&client.WebhookVerifier{Secret: "another-secret-0123"}).Verify(h, body); !errors.Is(err, client.ErrInvalidSignature) {
			t.Fatalf("wrong secret, standard: %v", err)
		}
		later := func() time.Time { return d.req.at.Add(6 * time.Minute) }
		if err := (&client.WebhookVerifier{Secret: secret, Now: later}).Verify(h, body); !errors.Is(err, client.ErrTimestampOutOfRange) {
			t.Fatalf("replayed 6 minutes later: %v", err)
		}
		if err := (&client.WebhookVerifier{Secret: secret, Now: later, Tolerance: 10 * time.Minute}).Verify(h, body); err != nil {
			t.Fatalf("6 minutes later, tolerance 10: %v", err)
		}
	}
}

// signHeaders signs body as the server signs a delivery (docs/webhooks.md):
// X-Service-Signature "sha256=" and the hex HMAC-SHA256 of the body, one
// value per secret separated by ", "; webhook-signature "v1," and the
// base64 HMAC-SHA256 of "id.timestamp.body", one entry per secret separated
// by spaces. TestVerifyRealDeliveries checks the real server's.
func signHeaders(h http.Header, secrets []string, id string, at time.Time, body []byte) {
	ts := strconv.FormatInt(at.Unix(), 10)
	var service, standard []string
	for _, s := range secrets {
		m := hmac.New(sha256.New, []byte(s))
		m.Write(body)
		service = append(service, "sha256="+hex.EncodeToString(m.Sum(nil)))
		m = hmac.New(sha256.New, []byte(s))
		m.Write([]byte(id + "." + ts + "."))
		m.Write(body)
		standard = append(standard, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	h.Set(client.HeaderSignature, strings.Join(service, ", "))
	h.Set(client.HeaderWebhookID, id)
	h.Set(client.HeaderWebhookTimestamp, ts)
	h.Set(client.HeaderWebhookSignature, strings.Join(standard, " "))
}

// TestVerifySignatureRules checks the verification at the edges of the
// tolerance, with several signatures, and while a secret is rotated.
func TestVerifySignatureRules(t *testing.T) {
	t.Parallel()
	secret := "whsec-0123456789abcdef"
	body := []byte(`{"event":"message.delivered","message_id":"01JJ8Z5N3T9V0Q6W2B4XKD7M1C","from":"+15550100001","to":"+15005550000","channel":"chat","timestamp":"2026-01-31T12:00:00.412345Z"}`)
	at := time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	signHeaders(h, []string{secret}, "01JJ8Z5QK1M3N5P7R9T1V3X5Z7", at, body)

	sig := h.Get(client.HeaderSignature)
	if err := client.VerifySignature(secret, body, sig); err != nil {
		t.Fatal(err)
	}
	if err := client.VerifySignature(secret, body, "sha256="+strings.ToUpper(strings.TrimPrefix(sig, "sha256="))); err != nil {
		t.Fatalf("upper-case hex: %v", err)
	}
	for _, bad := range []string{strings.TrimPrefix(sig, "sha256="), "sha1=" + strings.TrimPrefix(sig, "sha256="), "sha256=zz", sig[:len(sig)-2]} {
		if err := client.VerifySignature(secret, body, bad); !errors.Is(err, client.ErrInvalidSignature) {
			t.Errorf("header %q: %v", bad, err)
		}
	}
	if err := client.VerifySignature(secret, body, " "); !errors.Is(err, client.ErrMissingSignature) {
		t.Errorf("empty header: %v", err)
	}

	verify := func(now time.Time, tol time.Duration, h http.Header) error {
		return (&client.WebhookVerifier{Secret: secret, Tolerance: tol, Now: func() time.Time { return now }}).Verify(h, body)
	}
	for _, tc := range []struct {
		now  time.Time
		tol  time.Duration
		want error
	}{
		{at, 0, nil},
		{at.Add(5 * time.Minute), 0, nil},
		{at.Add(-5 * time.Minute), 0, nil},
		{at.Add(5*time.Minute + time.Second), 0, client.ErrTimestampOutOfRange},
		{at.Add(-5*time.Minute - time.Second), 0, client.ErrTimestampOutOfRange},
		{at.Add(30 * time.Second), 30 * time.Second, nil},
		{at.Add(31 * time.Second), 30 * time.Second, client.ErrTimestampOutOfRange},
	} {
		if err := verify(tc.now, tc.tol, h); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("at %v, tolerance %v: %v, want %v", tc.now.Sub(at), tc.tol, err, tc.want)
		}
	}

	good := h.Get(client.HeaderWebhookSignature)
	for _, tc := range []struct {
		name string
		set  map[string]string
		want error
	}{
		{"several signatures, one good", map[string]string{client.HeaderWebhookSignature: "v1,AAAA v1,bm90LWJhc2U2NCE= " + good}, nil},
		{"another version", map[string]string{client.HeaderWebhookSignature: "v2," + strings.TrimPrefix(good, "v1,")}, client.ErrInvalidSignature},
		{"another id", map[string]string{client.HeaderWebhookID: "01JJ8Z5QK1M3N5P7R9T1V3X5Z8"}, client.ErrInvalidSignature},
		{"another timestamp", map[string]string{client.HeaderWebhookTimestamp: strconv.FormatInt(at.Unix()+1, 10)}, client.ErrInvalidSignature},
		{"no id", map[string]string{client.HeaderWebhookID: ""}, client.ErrMissingSignature},
		{"no signature", map[string]string{client.HeaderWebhookSignature: ""}, client.ErrMissingSignature},
		{"timestamp not a number", map[string]string{client.HeaderWebhookTimestamp: "2026-01-31T12:00:00Z"}, client.ErrTimestampOutOfRange},
		{"absurd timestamp", map[string]string{client.HeaderWebhookTimestamp: "-9223372036854775808"}, client.ErrTimestampOutOfRange},
	} {
		h2 := h.Clone()
		for k, v := range tc.set {
			h2.Set(k, v)
		}
		if err := verify(at, 0, h2); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	// While a secret is rotated, a delivery is signed with both: a
	// receiver with either secret accepts it, with both helpers.
	const newSecret = "whsec-the-next-one-0123456789"
	rotated := http.Header{}
	signHeaders(rotated, []string{newSecret, secret}, "01JJ8Z5QK1M3N5P7R9T1V3X5Z7", at, body)
	for _, s := range []string{secret, newSecret} {
		if err := client.VerifySignature(s, body, rotated.Get(client.HeaderSignature)); err != nil {
			t.Errorf("rotated X-Service-Signature with %q: %v", s, err)
		}
		if err := (&client.WebhookVerifier{Secret: s, Now: func() time.Time { return at }}).Verify(rotated, body); err != nil {
			t.Errorf("rotated webhook-signature with %q: %v", s, err)
		}
	}
	if err := client.VerifySignature("whsec-a-third-one-0123456789", body, rotated.Get(client.HeaderSignature)); !errors.Is(err, client.ErrInvalidSignature) {
		t.Errorf("rotated X-Service-Signature with a third secret: %v", err)
	}

	// ReadEvent verifies before it parses.
	req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	req.Header = h.Clone()
	ev, err := (&client.WebhookVerifier{Secret: secret, Now: func() time.Time { return at }}).ReadEvent(req)
	if err != nil || ev.Type != client.EventMessageDelivered || ev.DeliveryID != "01JJ8Z5QK1M3N5P7R9T1V3X5Z7" || ev.Channel != client.ChannelChat ||
		!ev.Timestamp.Equal(time.Date(2026, 1, 31, 12, 0, 0, 412345000, time.UTC)) {
		t.Fatalf("event %+v, %v", ev, err)
	}
	req = httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader("{not json"))
	req.Header = h.Clone()
	if _, err := (&client.WebhookVerifier{Secret: secret, Now: func() time.Time { return at }}).ReadEvent(req); !errors.Is(err, client.ErrInvalidSignature) {
		t.Fatalf("unsigned body: %v", err)
	}
}

func TestParseEvent(t *testing.T) {
	t.Parallel()
	ev, err := client.ParseEvent([]byte(`{"event":"message.opened","message_id":"m1","from":"+1","to":"+2","channel":"sms","timestamp":"2026-01-31T12:00:00Z","extra":1}`))
	if err != nil || ev.Type != "message.opened" {
		t.Fatalf("an unknown event type: %+v %v", ev, err)
	}
	for _, body := range []string{`{"message_id":"m1","timestamp":"2026-01-31T12:00:00Z"}`, `{"event":"message.failed","timestamp":"2026-01-31T12:00:00Z"}`,
		`{"event":"message.failed","message_id":"m1"}`, `[]`, `{"event":"message.failed","message_id":"m1","timestamp":"yesterday"}`} {
		if _, err := client.ParseEvent([]byte(body)); err == nil {
			t.Errorf("ParseEvent(%s) accepted it", body)
		}
	}
}
