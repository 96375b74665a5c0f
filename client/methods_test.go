package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // quietNumber's zones, wherever the system has none

	"crypto/rand"

	"github.com/switchboard/switchboard/client"
)

// routeRecorder records the requests a client made and their statuses.
type routeRecorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	calls []routeCall
}

type routeCall struct {
	method, path, query string
	status              int
}

func (r *routeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		r.mu.Lock()
		r.calls = append(r.calls, routeCall{req.Method, req.URL.Path, req.URL.RawQuery, resp.StatusCode})
		r.mu.Unlock()
	}
	return resp, err
}

// succeeded reports whether a request matching the OpenAPI path template
// (with {params}) got a 2xx answer.
func (r *routeRecorder) succeeded(method, template string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := strings.Split(template, "/")
	for _, c := range r.calls {
		if c.method != method || c.status < 200 || c.status > 299 {
			continue
		}
		got := strings.Split(c.path, "/")
		if len(got) != len(want) {
			continue
		}
		match := true
		for i := range want {
			if !(strings.HasPrefix(want[i], "{") && got[i] != "") && want[i] != got[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// apiErr asserts that err is an *Error with the status and code, and
// returns it.
func apiErr(t testing.TB, err error, status int, code client.Code) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("want %d %s, got %v", status, code, err)
	}
	if e.StatusCode != status || e.Code != code || !errors.Is(err, code) {
		t.Fatalf("want %d %s, got %d %s (%v)", status, code, e.StatusCode, e.Code, err)
	}
	if !strings.HasPrefix(e.RequestID, "req_") {
		t.Fatalf("error without request id: %+v", e)
	}
	if e.Message == "" {
		t.Fatalf("error without message: %+v", e)
	}
	return e
}

// must returns v, or fails the test given to the function it returns when
// err is not nil: must(c.GetMessage(ctx, id))(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func near(t testing.TB, what string, got, want time.Time, within time.Duration) {
	t.Helper()
	if d := got.Sub(want); d < -within || d > within {
		t.Fatalf("%s = %v, want %v (within %v)", what, got, want, within)
	}
}

// hookSink is a webhook endpoint: it answers with status() and keeps every
// request.
type hookSink struct {
	srv    *httptest.Server
	status atomic.Int32
	mu     sync.Mutex
	reqs   []hookReq
}

type hookReq struct {
	header http.Header
	body   []byte
	at     time.Time
}

func newHookSink(t testing.TB, status int) *hookSink {
	h := &hookSink{}
	h.status.Store(int32(status))
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.reqs = append(h.reqs, hookReq{r.Header.Clone(), body, time.Now()})
		h.mu.Unlock()
		w.WriteHeader(int(h.status.Load()))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookSink) requests() []hookReq {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.reqs)
}

// quietNumber returns a number that is in quiet hours (21:00 to 08:00 local)
// now and stays so for at least 15 minutes, and when they end: 08:00 in the
// number's zone, which the table below gives as libphonenumber does.
func quietNumber(t testing.TB) (string, time.Time) {
	t.Helper()
	// Zones spread around the world (X: a random digit): whatever the
	// hour, some are in quiet hours with hours to go.
	zones := []struct{ pattern, zone string }{
		{"+1808956XXXX", "Pacific/Honolulu"}, {"+1213555XXXX", "America/Los_Angeles"},
		{"+1212555XXXX", "America/New_York"}, {"+55119XXXXXXXX", "America/Sao_Paulo"},
		{"+44207123XXXX", "Europe/London"}, {"+919812XXXXXX", "Asia/Kolkata"},
		{"+813123XXXXX", "Asia/Tokyo"}, {"+612912XXXXX", "Australia/Sydney"}, {"+64930XXXXX", "Pacific/Auckland"},
	}
	now := time.Now()
	for _, z := range zones {
		loc, err := time.LoadLocation(z.zone)
		if err != nil {
			t.Fatal(err)
		}
		local := now.In(loc)
		if h := local.Hour(); h >= 8 && h < 21 {
			continue
		}
		day := local
		if local.Hour() >= 21 {
			day = local.AddDate(0, 0, 1)
		}
		until := time.Date(day.Year(), day.Month(), day.Day(), 8, 0, 0, 0, loc)
		if until.Sub(now) > 15*time.Minute {
			return strings.TrimRight(z.pattern, "X") + randomDigits(strings.Count(z.pattern, "X")), until.UTC()
		}
	}
	t.Fatalf("no test number is in quiet hours at %v", now.UTC())
	return "", time.Time{}
}

func randomDigits(n int) string {
	var b strings.Builder
	for range n {
		d, _ := rand.Int(rand.Reader, big.NewInt(10))
		b.WriteByte(byte('0' + d.Int64()))
	}
	return b.String()
}

// TestEveryRoute calls every method of the client against the real server,
// checks the answers field by field, and then checks that every operation
// of the server's OpenAPI document was called with a 2xx answer: a route
// added to the server without a client method fails here.
func TestEveryRoute(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	tn := newTenant(t)
	rec := &routeRecorder{next: http.DefaultTransport}
	hc := &http.Client{Transport: rec, Timeout: time.Minute}
	live := newClient(t, tn.Live, client.WithHTTPClient(hc))
	test := newClient(t, tn.Test, client.WithHTTPClient(hc))
	start := time.Now()

	// A webhook whose endpoint fails, so that a delivery is failed (after
	// 2 + 4 + 8 s of retries) by the time the rest is done, for
	// RetryWebhookDelivery.
	failing := newHookSink(t, http.StatusInternalServerError)
	failHook := must(test.CreateWebhook(ctx, client.CreateWebhookParams{URL: failing.srv.URL + "/hook",
		Events: []client.EventType{client.EventMessageReceived}, Secret: "failing-secret-0123456789"}))(t)
	hello := must(test.SimulateInboundMessage(ctx, client.InboundParams{From: "+15005550009", Body: "hello"}))(t)

	t.Run("system", func(t *testing.T) {
		if err := live.Health(ctx); err != nil {
			t.Fatal(err)
		}
		if r, err := live.Ready(ctx); err != nil || r.Status != "ready" || r.Checks["database"].Status != "ok" {
			t.Fatalf("Ready: %+v, %v", r, err)
		}
		doc := must(live.OpenAPIDocument(ctx))(t)
		var d struct{ OpenAPI string }
		if err := json.Unmarshal(doc, &d); err != nil || d.OpenAPI != "3.1.0" {
			t.Fatalf("openapi document: %v %q", err, d.OpenAPI)
		}
	})

	t.Run("keys", func(t *testing.T) {
		k := must(live.CreateAPIKey(ctx, client.CreateAPIKeyParams{Name: "CI", RateLimit: 10, Environment: client.Test}))(t)
		if !regexp.MustCompile(`^svc_test_[0-9A-Za-z]{32}$`).MatchString(k.Key) || k.KeyHint != "..."+k.Key[len(k.Key)-4:] ||
			k.Name != "CI" || k.Environment != client.Test || k.Status != client.KeyActive || k.RateLimit == nil || *k.RateLimit != 10 ||
			k.LastUsedAt != nil {
			t.Fatalf("created key: %+v", k)
		}
		near(t, "created_at", k.CreatedAt, time.Now(), time.Minute)
		keys := must(live.ListAPIKeys(ctx))(t)
		var names []string
		for _, k := range keys {
			names = append(names, k.Name)
		}
		if !slices.Equal(names, []string{"Default live key", "Default test key", "CI"}) || keys[0].RateLimit != nil || keys[0].Environment != client.Live {
			t.Fatalf("keys: %v %s", names, jsonString(keys))
		}
		// The new key works, and sees the test keys only.
		ci := newClient(t, k.Key)
		if got := must(ci.ListAPIKeys(ctx))(t); len(got) != 2 || got[0].Name != "Default test key" || got[1].ID != k.ID {
			t.Fatalf("keys seen by a test key: %s", jsonString(got))
		}
		if err := live.RevokeAPIKey(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		_, err := ci.ListAPIKeys(ctx)
		apiErr(t, err, 401, client.CodeInvalidAPIKey)
		apiErr(t, live.RevokeAPIKey(ctx, k.ID), 404, client.CodeNotFound)
		_, err = test.CreateAPIKey(ctx, client.CreateAPIKeyParams{Name: "x", Environment: client.Live})
		apiErr(t, err, 403, client.CodeForbidden)
		if _, err := live.CreateAPIKey(ctx, client.CreateAPIKeyParams{}); apiErr(t, err, 400, client.CodeValidation).Details.Field != "name" {
			t.Fatalf("details: %+v", err)
		}
	})

	t.Run("templates and messages", func(t *testing.T) {
		tpl := must(test.CreateTemplate(ctx, client.CreateTemplateParams{Name: "shipped", Body: "Hi {{ name }}, order {{order}} has shipped"}))(t)
		if tpl.Name != "shipped" || !slices.Equal(tpl.Variables, []string{"name", "order"}) || tpl.ID == "" {
			t.Fatalf("template: %+v", tpl)
		}
		if got := must(test.GetTemplate(ctx, tpl.ID))(t); jsonString(got) != jsonString(tpl) {
			t.Fatalf("get template: %s, want %s", jsonString(got), jsonString(tpl))
		}
		if got := collect(t, test.ListTemplates(ctx, nil)); len(got) != 1 || got[0].ID != tpl.ID {
			t.Fatalf("list templates: %s", jsonString(got))
		}
		_, err := test.CreateTemplate(ctx, client.CreateTemplateParams{Name: "shipped", Body: "again"})
		apiErr(t, err, 409, client.CodeDuplicateTemplate)

		res := must(test.SendMessage(ctx, client.SendParams{To: "+15005550000", Template: "shipped",
			Data: map[string]any{"name": "Ada", "order": 1234}, Channel: client.ChannelSMS}))(t)
		if res.Status != client.StatusQueued || res.Channel != client.ChannelSMS || res.To != "+15005550000" || res.From != tn.PhoneNumber ||
			res.Livemode || res.QuietHours || res.Replayed || len(res.IdempotencyKey) != 26 || res.ScheduledAt != nil {
			t.Fatalf("send: %+v", res)
		}
		var m *client.Message
		waitFor(t, 30*time.Second, "delivery", func() (bool, error) {
			var err error
			m, err = test.GetMessage(ctx, res.MessageID)
			return err == nil && m.Status == client.StatusDelivered, err
		})
		if m.Body != "Hi Ada, order 1234 has shipped" || m.Template == nil || *m.Template != "shipped" || m.Direction != client.Outbound ||
			m.SentAt == nil || m.DeliveredAt == nil || m.FailedAt != nil || m.FailureReason != nil || m.ErrorCode != nil || m.CampaignID != nil {
			t.Fatalf("delivered message: %s", jsonString(m))
		}

		// With the caller's key: the first answer, replayed.
		p := client.SendParams{To: "+15005550001", Body: "This one fails", IdempotencyKey: "order-1234-" + tn.ID}
		failed := must(test.SendMessage(ctx, p))(t)
		again := must(test.SendMessage(ctx, p))(t)
		if failed.IdempotencyKey != p.IdempotencyKey || failed.Replayed || !again.Replayed || again.MessageID != failed.MessageID {
			t.Fatalf("idempotent sends: %+v then %+v", failed, again)
		}
		p.Body = "another body"
		_, err = test.SendMessage(ctx, p)
		apiErr(t, err, 409, client.CodeIdempotencyConflict)
		waitFor(t, 30*time.Second, "failure", func() (bool, error) {
			var err error
			m, err = test.GetMessage(ctx, failed.MessageID)
			return err == nil && m.Status == client.StatusFailed, err
		})
		if m.FailureReason == nil || *m.FailureReason != "simulated carrier rejection" || m.ErrorCode == nil || *m.ErrorCode != client.CodeDeliveryFailed || m.FailedAt == nil {
			t.Fatalf("failed message: %s", jsonString(m))
		}
		if got := collect(t, test.ListMessages(ctx, &client.ListMessagesParams{Status: client.StatusFailed})); len(got) != 1 || got[0].ID != failed.MessageID {
			t.Fatalf("failed messages: %s", jsonString(got))
		}
		if got := collect(t, test.ListMessages(ctx, &client.ListMessagesParams{From: "+15005550000", CreatedAfter: start})); len(got) != 0 {
			t.Fatalf("messages from a recipient: %s", jsonString(got))
		}
		if got := collect(t, test.ListMessages(ctx, &client.ListMessagesParams{To: "+15005550000", CreatedAfter: start, CreatedBefore: time.Now().Add(time.Minute)})); len(got) != 1 || got[0].ID != res.MessageID {
			t.Fatalf("messages in a time range: %s", jsonString(got))
		}
		if got := collect(t, test.ListMessages(ctx, &client.ListMessagesParams{To: "+15005550000", Direction: client.Outbound})); len(got) != 1 || got[0].ID != res.MessageID {
			t.Fatalf("messages to +15005550000: %s", jsonString(got))
		}

		// Opt-out through a simulated inbound STOP.
		in := must(test.SimulateInboundMessage(ctx, client.InboundParams{From: "+15005550002", Body: "STOP"}))(t)
		if in.Direction != client.Inbound || in.Status != client.StatusReceived || in.To != tn.PhoneNumber || in.Body != "STOP" || in.Channel != client.ChannelSMS {
			t.Fatalf("inbound: %s", jsonString(in))
		}
		_, err = test.SendMessage(ctx, client.SendParams{To: "+15005550002", Body: "hi"})
		apiErr(t, err, 400, client.CodeRecipientOptedOut)

		// Field errors name the field.
		_, err = test.SendMessage(ctx, client.SendParams{To: "12345", Body: "hi"})
		apiErr(t, err, 400, client.CodeInvalidPhoneNumber)
		_, err = test.SendMessage(ctx, client.SendParams{To: "+15005550000"})
		if e := apiErr(t, err, 400, client.CodeValidation); e.Details.Field != "body" {
			t.Fatalf("details: %+v", e.Details)
		}
		_, err = test.SendMessage(ctx, client.SendParams{To: "+15005550000", Template: "shipped", Data: map[string]any{"name": "Ada"}})
		if e := apiErr(t, err, 400, client.CodeMissingTemplateVar); e.Details.Field != "data.order" {
			t.Fatalf("details: %+v", e.Details)
		}

		// Quiet hours: accepted, not an error.
		qn, until := quietNumber(t)
		q := must(test.SendMessage(ctx, client.SendParams{To: qn, Body: "good morning"}))(t)
		if !q.QuietHours || q.ScheduledAt == nil || !q.ScheduledAt.Equal(until) || q.Status != client.StatusQueued {
			t.Fatalf("quiet-hours send: %+v, want scheduled at %v", q, until)
		}

		// The chat engine down: a chat send answers 503, which the client
		// retries four times (2, 4, 8, 16 s: on a clock that does not wait;
		// 32 s more would pass its 30 s budget) before it gives up.
		st := must(test.SetSimulatorSettings(ctx, client.SimulatorSettings{ChatEngine: client.EngineDown}))(t)
		if st.ChatEngine != client.EngineDown {
			t.Fatalf("simulator: %+v", st)
		}
		clock := &fakeClock{now: time.Now()}
		rec503 := &routeRecorder{next: http.DefaultTransport}
		chat := newClient(t, tn.Test, client.WithClock(clock), client.WithHTTPClient(&http.Client{Transport: rec503}))
		_, err = chat.SendMessage(ctx, client.SendParams{To: "+15005550000", Body: "hi", Channel: client.ChannelChat})
		apiErr(t, err, 503, client.CodeChannelUnavailable)
		if got := clock.slept(); !slices.Equal(got, secs(2, 4, 8, 16)) || len(rec503.calls) != 5 {
			t.Fatalf("503 retries: slept %v, %d requests", got, len(rec503.calls))
		}
		must(test.SetSimulatorSettings(ctx, client.SimulatorSettings{ChatEngine: client.EngineUp}))(t)
		must(test.SendMessage(ctx, client.SendParams{To: "+15005550000", Body: "hi", Channel: client.ChannelChat}))(t)

		if err := test.DeleteTemplate(ctx, tpl.ID); err != nil {
			t.Fatal(err)
		}
		_, err = test.GetTemplate(ctx, tpl.ID)
		apiErr(t, err, 404, client.CodeNotFound)
		_, err = test.GetMessage(ctx, "01JD5Z8Q4K7V3N2M1X0W9Y8T7R")
		apiErr(t, err, 404, client.CodeNotFound)
		// Another environment's message is not found either.
		_, err = live.GetMessage(ctx, res.MessageID)
		apiErr(t, err, 404, client.CodeNotFound)
	})

	t.Run("webhooks", func(t *testing.T) {
		sink := newHookSink(t, http.StatusNoContent)
		events := []client.EventType{client.EventMessageDelivered, client.EventMessageFailed}
		wh := must(test.CreateWebhook(ctx, client.CreateWebhookParams{URL: sink.srv.URL + "/hooks", Events: events, Secret: "whsec-0123456789abcdef"}))(t)
		if wh.URL != sink.srv.URL+"/hooks" || !slices.Equal(wh.Events, events) || wh.Environment != client.Test || wh.ID == "" {
			t.Fatalf("webhook: %+v", wh)
		}
		if got := must(test.ListWebhooks(ctx))(t); len(got) != 2 || got[0].ID != failHook.ID || got[1].ID != wh.ID {
			t.Fatalf("webhooks: %s", jsonString(got))
		}
		if got := must(live.ListWebhooks(ctx))(t); len(got) != 0 {
			t.Fatalf("live webhooks: %s", jsonString(got))
		}
		_, err := test.CreateWebhook(ctx, client.CreateWebhookParams{URL: sink.srv.URL, Events: events, Secret: "short"})
		if e := apiErr(t, err, 400, client.CodeValidation); e.Details.Field != "secret" {
			t.Fatalf("details: %+v", e.Details)
		}
		res := must(test.SendMessage(ctx, client.SendParams{To: "+15005550005", Body: "hooked"}))(t)
		var d *client.WebhookDelivery
		waitFor(t, 30*time.Second, "a succeeded delivery", func() (bool, error) {
			var err error
			d, err = deliveryOf(test.ListWebhookDeliveries(ctx, wh.ID, nil), res.MessageID)
			return d != nil && d.Status == client.DeliverySucceeded, err
		})
		if d.Event != client.EventMessageDelivered || d.MessageID != res.MessageID || len(d.Attempts) != 1 || d.NextAttemptAt != nil ||
			d.Attempts[0].StatusCode == nil || *d.Attempts[0].StatusCode != 204 || d.Attempts[0].Error != nil {
			t.Fatalf("delivery: %s", jsonString(d))
		}
		n := 0
		for _, r := range sink.requests() {
			if r.header.Get(client.HeaderDelivery) == d.ID {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("the endpoint got the delivery %d times", n)
		}
		_, err = test.RetryWebhookDelivery(ctx, wh.ID, d.ID)
		apiErr(t, err, 409, client.CodeDeliveryNotFailed)
		if got := must(test.GetWebhookDelivery(ctx, wh.ID, d.ID))(t); got.ID != d.ID || got.Status != client.DeliverySucceeded || len(got.Attempts) != 1 {
			t.Fatalf("one delivery: %s", jsonString(got))
		}
		_, err = test.GetWebhookDelivery(ctx, wh.ID, "01ARZ3NDEKTSV4RRFFQ69G5FAV")
		apiErr(t, err, 404, client.CodeNotFound)
		if got := must(test.GetWebhook(ctx, wh.ID))(t); got.ID != wh.ID || got.URL != wh.URL || got.PreviousSecretExpiresAt != nil {
			t.Fatalf("get webhook: %s", jsonString(got))
		}
		_, err = live.GetWebhook(ctx, wh.ID)
		apiErr(t, err, 404, client.CodeNotFound)
		// A new secret: the old one signs beside it for 24 hours.
		rotated := must(test.UpdateWebhook(ctx, wh.ID, client.UpdateWebhookParams{Secret: "whsec-the-next-one-0123456789",
			Events: []client.EventType{client.EventMessageDelivered}}))(t)
		if rotated.PreviousSecretExpiresAt == nil || rotated.PreviousSecretExpiresAt.Sub(time.Now()) < 23*time.Hour ||
			!slices.Equal(rotated.Events, []client.EventType{client.EventMessageDelivered}) || rotated.URL != wh.URL {
			t.Fatalf("updated webhook: %s", jsonString(rotated))
		}
		_, err = test.UpdateWebhook(ctx, wh.ID, client.UpdateWebhookParams{Secret: "short"})
		if e := apiErr(t, err, 400, client.CodeValidation); e.Details.Field != "secret" {
			t.Fatalf("details: %+v", e.Details)
		}
		if err := test.DeleteWebhook(ctx, wh.ID); err != nil {
			t.Fatal(err)
		}
		apiErr(t, test.DeleteWebhook(ctx, wh.ID), 404, client.CodeNotFound)
	})

	t.Run("contacts", func(t *testing.T) {
		ada := must(test.CreateContact(ctx, client.CreateContactParams{Phone: "+14155550100", Name: "Ada", Fields: map[string]string{"code": "A1"}}))(t)
		if ada.Phone != "+14155550100" || ada.Name == nil || *ada.Name != "Ada" || ada.Fields["code"] != "A1" || ada.OptedOut {
			t.Fatalf("contact: %s", jsonString(ada))
		}
		_, err := test.CreateContact(ctx, client.CreateContactParams{Phone: "+14155550100"})
		if e := apiErr(t, err, 409, client.CodeDuplicateContact); e.Details.ExistingID != ada.ID {
			t.Fatalf("details: %+v", e.Details)
		}
		if got := must(test.GetContact(ctx, ada.ID))(t); jsonString(got) != jsonString(ada) {
			t.Fatalf("get contact: %s", jsonString(got))
		}
		upd := must(test.UpdateContact(ctx, ada.ID, client.UpdateContactParams{Name: client.Null[string](), Fields: client.Value(map[string]string{"code": "B2"})}))(t)
		if upd.Name != nil || !maps(upd.Fields, map[string]string{"code": "B2"}) || upd.Phone != ada.Phone {
			t.Fatalf("updated contact: %s", jsonString(upd))
		}
		upd = must(test.UpdateContact(ctx, ada.ID, client.UpdateContactParams{Phone: "+14155550101", Name: client.Value("Ada L.")}))(t)
		if upd.Phone != "+14155550101" || upd.Name == nil || *upd.Name != "Ada L." || !maps(upd.Fields, map[string]string{"code": "B2"}) {
			t.Fatalf("updated contact: %s", jsonString(upd))
		}
		upd = must(test.UpdateContact(ctx, ada.ID, client.UpdateContactParams{Fields: client.Null[map[string]string]()}))(t)
		if len(upd.Fields) != 0 || upd.Name == nil {
			t.Fatalf("updated contact: %s", jsonString(upd))
		}

		csv := "phone,name,city\n+14155550102,Grace,NYC\n+14155550101,,\nnot-a-phone,X,\n"
		rep := must(test.ImportContacts(ctx, strings.NewReader(csv)))(t)
		if rep.Created != 1 || rep.Duplicates != 1 || rep.Invalid != 1 || len(rep.Rows) != 3 ||
			rep.Rows[0].Row != 2 || rep.Rows[0].Status != client.RowCreated || rep.Rows[0].ID == "" ||
			rep.Rows[1].Row != 3 || rep.Rows[1].Status != client.RowDuplicate || rep.Rows[1].ExistingID != ada.ID ||
			rep.Rows[2].Row != 4 || rep.Rows[2].Status != client.RowInvalid || rep.Rows[2].Error == "" {
			t.Fatalf("import: %s", jsonString(rep))
		}
		_, err = test.ImportContacts(ctx, strings.NewReader("name\nAda\n"))
		apiErr(t, err, 400, client.CodeValidation)
		grace := collect(t, test.ListContacts(ctx, &client.ListContactsParams{Phone: "+14155550102"}))
		if len(grace) != 1 || grace[0].ID != rep.Rows[0].ID || grace[0].Name == nil || *grace[0].Name != "Grace" || !maps(grace[0].Fields, map[string]string{"city": "NYC"}) {
			t.Fatalf("contacts with the phone: %s", jsonString(grace))
		}
		if all := collect(t, test.ListContacts(ctx, nil)); len(all) != 2 || all[0].ID != grace[0].ID || all[1].ID != ada.ID {
			t.Fatalf("contacts: %s", jsonString(all))
		}
		if err := test.DeleteContact(ctx, grace[0].ID); err != nil {
			t.Fatal(err)
		}
		_, err = test.GetContact(ctx, grace[0].ID)
		apiErr(t, err, 404, client.CodeContactNotFound)
	})

	t.Run("campaigns", func(t *testing.T) {
		cp := must(test.CreateCampaign(ctx, client.CreateCampaignParams{Name: "Spring", Body: "Sale!", Channel: client.ChannelSMS,
			To: []string{"+15005550006", "+15005550007"}}))(t)
		if cp.Status != client.CampaignDraft || cp.Audience != client.AudienceTo || cp.Counts.Total != 2 || cp.Counts.Pending != 2 ||
			cp.Body == nil || *cp.Body != "Sale!" || cp.Template != nil || cp.Channel != client.ChannelSMS || cp.LaunchedAt != nil {
			t.Fatalf("campaign: %s", jsonString(cp))
		}
		if got := must(test.GetCampaign(ctx, cp.ID))(t); got.ID != cp.ID || got.Name != "Spring" {
			t.Fatalf("get campaign: %s", jsonString(got))
		}
		run := must(test.LaunchCampaign(ctx, cp.ID))(t)
		if run.Status != client.CampaignRunning || run.LaunchedAt == nil {
			t.Fatalf("launched: %s", jsonString(run))
		}
		_, err := test.LaunchCampaign(ctx, cp.ID)
		apiErr(t, err, 409, client.CodeCampaignNotDraft)
		waitFor(t, 60*time.Second, "the campaign to complete", func() (bool, error) {
			got, err := test.GetCampaign(ctx, cp.ID)
			if err == nil && got.Status == client.CampaignCompleted {
				if got.Counts.Delivered != 2 || got.Counts.Pending != 0 || got.CompletedAt == nil {
					return false, fmt.Errorf("completed campaign: %s", jsonString(got))
				}
				return true, nil
			}
			return false, err
		})
		if msgs := collect(t, test.ListMessages(ctx, &client.ListMessagesParams{To: "+15005550006"})); len(msgs) != 1 ||
			msgs[0].CampaignID == nil || *msgs[0].CampaignID != cp.ID {
			t.Fatalf("campaign messages: %s", jsonString(msgs))
		}
		for _, m := range collect(t, test.ListMessages(ctx, &client.ListMessagesParams{CampaignID: cp.ID})) {
			if m.CampaignID == nil || *m.CampaignID != cp.ID {
				t.Fatalf("a message of another campaign: %s", jsonString(m))
			}
		}
		draft := must(test.CreateCampaign(ctx, client.CreateCampaignParams{Name: "Never", Body: "x", AllContacts: true}))(t)
		if got := collect(t, test.ListCampaigns(ctx, nil)); len(got) != 2 || got[0].ID != draft.ID || got[1].ID != cp.ID {
			t.Fatalf("campaigns: %s", jsonString(got))
		}
		canceled := must(test.CancelCampaign(ctx, draft.ID))(t)
		if canceled.Status != client.CampaignCanceled || canceled.CanceledAt == nil || canceled.Audience != client.AudienceAllContacts {
			t.Fatalf("canceled: %s", jsonString(canceled))
		}
		_, err = test.GetCampaign(ctx, "01JD5Z8Q4K7V3N2M1X0W9Y8T7R")
		apiErr(t, err, 404, client.CodeCampaignNotFound)
	})

	t.Run("phones", func(t *testing.T) {
		phones := must(live.ListPhones(ctx))(t)
		if len(phones) != 1 || phones[0].ID != tn.PhoneID || phones[0].Kind != client.PhoneSimulated || phones[0].Status != client.PhoneOnline ||
			phones[0].DailyLimit != nil || phones[0].Device != nil || !slices.Equal(phones[0].Channels, []client.Channel{client.ChannelSMS, client.ChannelChat}) {
			t.Fatalf("phones: %s", jsonString(phones))
		}
		number := "+1555" + randomDigits(7)
		np := must(live.CreatePhone(ctx, client.CreatePhoneParams{Number: number, DailyLimit: client.Value(500), RateLimit: 20}))(t)
		if np.Number != number || np.Kind != client.PhoneAndroid || np.Status != client.PhoneOffline || np.DailyLimit == nil || *np.DailyLimit != 500 ||
			np.RateLimit == nil || *np.RateLimit != 20 || np.Device != nil || np.LastSeenAt != nil || !regexp.MustCompile(`^[0-9]{8}$`).MatchString(np.Pairing.Code) {
			t.Fatalf("new phone: %s", jsonString(np))
		}
		near(t, "pairing expires_at", np.Pairing.ExpiresAt, time.Now().Add(15*time.Minute), time.Minute)
		// Left out, the daily limit is the default; null, none.
		def := must(live.CreatePhone(ctx, client.CreatePhoneParams{Number: "+1555" + randomDigits(7)}))(t)
		none := must(live.CreatePhone(ctx, client.CreatePhoneParams{Number: "+1555" + randomDigits(7), DailyLimit: client.Null[int](), SIMNumber: 2}))(t)
		if def.DailyLimit == nil || *def.DailyLimit != 1000 || none.DailyLimit != nil || def.RateLimit != nil {
			t.Fatalf("daily limits: default %s, null %s", jsonString(def.DailyLimit), jsonString(none.DailyLimit))
		}
		_, err := test.CreatePhone(ctx, client.CreatePhoneParams{Number: "+1555" + randomDigits(7)})
		apiErr(t, err, 403, client.CodeForbidden)
		// A chat engine the server does not offer (it has none).
		_, err = live.CreatePhone(ctx, client.CreatePhoneParams{Number: "+1555" + randomDigits(7), Provider: "rcs"})
		if e := apiErr(t, err, 400, client.CodeValidation); e.Details.Field != "provider" {
			t.Fatalf("details: %+v", e.Details)
		}
		_, err = live.CreatePhone(ctx, client.CreatePhoneParams{Number: tn.PhoneNumber})
		if e := apiErr(t, err, 409, client.CodeDuplicatePhone); e.Details.ExistingID != tn.PhoneID {
			t.Fatalf("details: %+v", e.Details)
		}
		if got := must(test.GetPhone(ctx, np.ID))(t); got.ID != np.ID || got.Number != number {
			t.Fatalf("get phone: %s", jsonString(got))
		}
		upd := must(live.UpdatePhone(ctx, np.ID, client.UpdatePhoneParams{DailyLimit: client.Null[int](), RateLimit: client.Value(30)}))(t)
		if upd.DailyLimit != nil || upd.RateLimit == nil || *upd.RateLimit != 30 {
			t.Fatalf("updated phone: %s", jsonString(upd))
		}
		upd = must(live.UpdatePhone(ctx, np.ID, client.UpdatePhoneParams{DailyLimit: client.Value(100)}))(t)
		if upd.DailyLimit == nil || *upd.DailyLimit != 100 || upd.RateLimit == nil || *upd.RateLimit != 30 {
			t.Fatalf("updated phone: %s", jsonString(upd))
		}
		pair := must(live.PairPhone(ctx, np.ID))(t)
		if !regexp.MustCompile(`^[0-9]{8}$`).MatchString(pair.Code) {
			t.Fatalf("pairing: %+v", pair)
		}
		near(t, "pairing expires_at", pair.ExpiresAt, time.Now().Add(15*time.Minute), time.Minute)
		_, err = live.PairPhone(ctx, tn.PhoneID)
		apiErr(t, err, 400, client.CodeValidation)
		if err := live.DeletePhone(ctx, np.ID); err != nil {
			t.Fatal(err)
		}
		_, err = live.GetPhone(ctx, np.ID)
		apiErr(t, err, 404, client.CodeNotFound)
		if got := must(live.ListPhones(ctx))(t); len(got) != 3 {
			t.Fatalf("phones after delete: %s", jsonString(got))
		}
	})

	t.Run("failed delivery retried", func(t *testing.T) {
		var d *client.WebhookDelivery
		waitFor(t, 60*time.Second, "the failing delivery to fail", func() (bool, error) {
			var err error
			d, err = deliveryOf(test.ListWebhookDeliveries(ctx, failHook.ID, nil), hello.ID)
			return d != nil && d.Status == client.DeliveryFailed, err
		})
		if len(d.Attempts) != 4 || d.Event != client.EventMessageReceived {
			t.Fatalf("failed delivery: %s", jsonString(d))
		}
		for _, a := range d.Attempts {
			if a.StatusCode == nil || *a.StatusCode != 500 || a.Error == nil || a.Duration < 0 {
				t.Fatalf("attempt: %s", jsonString(a))
			}
		}
		failing.status.Store(http.StatusOK)
		again := must(test.RetryWebhookDelivery(ctx, failHook.ID, d.ID))(t)
		if again.ID != d.ID || again.Status != client.DeliveryPending {
			t.Fatalf("retried delivery: %s", jsonString(again))
		}
		waitFor(t, 30*time.Second, "the retried delivery to succeed", func() (bool, error) {
			got, err := deliveryOf(test.ListWebhookDeliveries(ctx, failHook.ID, nil), hello.ID)
			return got != nil && got.Status == client.DeliverySucceeded && len(got.Attempts) == 5, err
		})
		// Nothing failed is left to recover.
		rec := must(test.RecoverWebhook(ctx, failHook.ID, client.RecoverWebhookParams{Since: start.Add(-time.Minute)}))(t)
		if rec.Recovered != 0 || rec.WebhookID != failHook.ID || !rec.Until.After(rec.Since) {
			t.Fatalf("recovery: %s", jsonString(rec))
		}
	})

	// Every operation of the document got a 2xx from the client.
	doc := must(live.OpenAPIDocument(ctx))(t)
	var d struct {
		Paths map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for path, ops := range d.Paths {
		for method := range ops {
			m := strings.ToUpper(method)
			switch m {
			case "GET", "POST", "PUT", "PATCH", "DELETE":
			default:
				continue
			}
			if !rec.succeeded(m, path) {
				missing = append(missing, m+" "+path)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("operations of the OpenAPI document the client did not call with success: %v", missing)
	}
	if took := time.Since(start); testing.Verbose() {
		t.Logf("took %v", took)
	}
}

// deliveryOf returns the delivery of the message among a webhook's, or nil.
func deliveryOf(seq func(func(*client.WebhookDelivery, error) bool), messageID string) (*client.WebhookDelivery, error) {
	for d, err := range seq {
		if err != nil {
			return nil, err
		}
		if d.MessageID == messageID {
			return d, nil
		}
	}
	return nil, nil
}

func collectErr[T any](seq func(func(*T, error) bool)) ([]*T, error) {
	var out []*T
	for it, err := range seq {
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
