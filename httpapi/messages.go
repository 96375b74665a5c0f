package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
	"github.com/switchboard/switchboard/phonenum"
	"github.com/switchboard/switchboard/sqlstore"
	"github.com/switchboard/switchboard/tmpl"
)

// MessageStore is what the message routes need from storage.
type MessageStore interface {
	AcceptSend(ctx context.Context, s *sb.Send) error
	Idempotency(ctx context.Context, tenantID string, env sb.Environment, key string, now time.Time) (*sb.IdempotencyRecord, error)
	Recipient(ctx context.Context, tenantID string, env sb.Environment, number string) (known, optedOut bool, err error)
	NewContactsToday(ctx context.Context, tenantID string, env sb.Environment, day string) (int64, error)
	Message(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Message, error)
	Messages(ctx context.Context, tenantID string, env sb.Environment, f sb.MessageFilter, p sb.Page) ([]*sb.Message, error)
	Inbound(ctx context.Context, m *sb.Message) error
}

// messageJSON is the message record (docs/api.md).
type messageJSON struct {
	ID            string        `json:"id"`
	Direction     string        `json:"direction"`
	From          string        `json:"from"`
	To            string        `json:"to"`
	Body          string        `json:"body"`
	Channel       string        `json:"channel"`
	Status        string        `json:"status"`
	FailureReason *string       `json:"failure_reason"`
	ErrorCode     *string       `json:"error_code"`
	Template      *string       `json:"template"`
	CampaignID    *string       `json:"campaign_id"`
	Livemode      bool          `json:"livemode"`
	CreatedAt     time.Time     `json:"created_at"`
	ScheduledAt   *time.Time    `json:"scheduled_at"`
	SentAt        *time.Time    `json:"sent_at"`
	DeliveredAt   *time.Time    `json:"delivered_at"`
	FailedAt      *time.Time    `json:"failed_at"`
	Engine        string        `json:"engine"`
	ReadAt        *time.Time    `json:"read_at"`
	Fallback      *fallbackJSON `json:"fallback"`
	TTL           *int64        `json:"ttl"`
	Priority      string        `json:"priority"`
}

// fallbackJSON says that a chat message was sent again by SMS.
type fallbackJSON struct {
	From   string `json:"from"`
	Reason string `json:"reason"`
}

func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func toMessageJSON(m *sb.Message) messageJSON {
	return messageJSON{
		ID: m.ID, Direction: m.Direction, From: m.From, To: m.To, Body: m.Body, Channel: m.Channel, Status: m.Status,
		FailureReason: strOrNil(m.FailureReason), ErrorCode: strOrNil(m.ErrorCode), Template: strOrNil(m.Template),
		CampaignID: strOrNil(m.CampaignID), Livemode: m.Env == sb.Live, CreatedAt: m.CreatedAt,
		ScheduledAt: m.ScheduledAt, SentAt: m.SentAt, DeliveredAt: m.DeliveredAt, FailedAt: m.FailedAt,
		Engine: m.CarriedBy(), ReadAt: m.ReadAt, Fallback: toFallbackJSON(m.Fallback), TTL: ttlJSON(m.TTL),
		Priority: priorityJSON(m),
	}
}

// priorityJSON is the record's priority: "high" for a send of priority
// high, else "normal" (campaign and inbound messages among them).
func priorityJSON(m *sb.Message) string {
	if m.HighPriority {
		return "high"
	}
	return "normal"
}

// ttlJSON is the record's ttl: whole seconds, or null on a message that was
// not sent with channel auto.
func ttlJSON(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	s := int64(d / time.Second)
	return &s
}

func toFallbackJSON(f *sb.Fallback) *fallbackJSON {
	if f == nil {
		return nil
	}
	return &fallbackJSON{From: f.From, Reason: f.Reason}
}

// sendJSON is the answer to an accepted send.
type sendJSON struct {
	MessageID   string     `json:"message_id"`
	Status      string     `json:"status"`
	From        string     `json:"from"`
	To          string     `json:"to"`
	Channel     string     `json:"channel"`
	Livemode    bool       `json:"livemode"`
	CreatedAt   time.Time  `json:"created_at"`
	ScheduledAt *time.Time `json:"scheduled_at"`
}

type sendRequest struct {
	To       *string                    `json:"to"`
	Body     *string                    `json:"body"`
	Template *string                    `json:"template"`
	Data     map[string]json.RawMessage `json:"data"`
	Channel  *string                    `json:"channel"`
	From     *string                    `json:"from"`
	Priority *string                    `json:"priority"`
	TTL      *int64                     `json:"ttl"`
}

// validate applies the field rules: every VALIDATION_ERROR first, then
// INVALID_PHONE_NUMBER (docs/api.md).
func (req *sendRequest) validate() (data map[string]string, err error) {
	if req.To == nil || *req.To == "" {
		return nil, sb.Invalid("to", "to is required.")
	}
	if req.Priority != nil && *req.Priority != "normal" && *req.Priority != "high" {
		return nil, sb.Invalid("priority", `priority must be "normal" or "high".`)
	}
	if data, err = req.validateContent(); err != nil {
		return nil, err
	}
	if req.TTL != nil {
		minS, maxS := int64(sb.MinChatTTL/time.Second), int64(sb.MaxChatTTL/time.Second)
		if *req.TTL < minS || *req.TTL > maxS {
			return nil, sb.Invalid("ttl", "ttl must be %d to %d seconds.", minS, maxS)
		}
		if req.Channel != nil && *req.Channel != sb.ChannelAuto {
			return nil, sb.Invalid("ttl", `ttl is how long chat has before an SMS is sent instead: it goes with channel "auto" only.`)
		}
	}
	if !phonenum.Valid(*req.To) {
		return nil, sb.InvalidPhone("to", "to must be an E.164 number: + and 10 to 15 digits.")
	}
	if req.From != nil && !phonenum.Valid(*req.From) {
		return nil, sb.InvalidPhone("from", "from must be an E.164 number: + and 10 to 15 digits.")
	}
	return data, nil
}

// validateContent checks body, template, data and channel, which campaigns
// share with sends, and returns data as template text.
func (req *sendRequest) validateContent() (data map[string]string, err error) {
	switch {
	case req.Body != nil && req.Template != nil:
		return nil, sb.Invalid("body", "Send exactly one of body and template, not both.")
	case req.Body == nil && req.Template == nil:
		return nil, sb.Invalid("body", "Send exactly one of body and template.")
	case req.Body != nil && (*req.Body == "" || utf8.RuneCountInString(*req.Body) > sb.MaxBodyLength):
		return nil, sb.Invalid("body", "body must be 1 to %d characters.", sb.MaxBodyLength)
	case req.Template != nil && *req.Template == "":
		return nil, sb.Invalid("template", "template must name a template.")
	case req.Data != nil && req.Template == nil:
		return nil, sb.Invalid("data", "data is only used with template.")
	}
	if data, err = templateData(req.Data); err != nil {
		return nil, err
	}
	if req.Channel != nil {
		switch *req.Channel {
		case sb.ChannelSMS, sb.ChannelChat, sb.ChannelAuto:
		default:
			return nil, sb.Invalid("channel", `channel must be "sms", "chat" or "auto".`)
		}
	}
	return data, nil
}

// templateData checks the data object against its limits and returns it as
// template text.
func templateData(raw map[string]json.RawMessage) (map[string]string, error) {
	if len(raw) > sb.MaxDataKeys {
		return nil, sb.Invalid("data", "data may have at most %d keys.", sb.MaxDataKeys)
	}
	data := make(map[string]string, len(raw))
	total := 0
	for k, r := range raw {
		if len(k) > sb.MaxDataKeyLen {
			return nil, sb.Invalid("data", "The keys of data are variable names of at most %d characters.", sb.MaxDataKeyLen)
		}
		v, ok := scalarString(r)
		if !ok {
			return nil, sb.Invalid("data."+k, "data.%s must be a string, number or boolean.", k)
		}
		if len(v) > sb.MaxDataValueLen && utf8.RuneCountInString(v) > sb.MaxDataValueLen {
			return nil, sb.Invalid("data."+k, "data.%s must be at most %d characters.", k, sb.MaxDataValueLen)
		}
		if total += len(k) + len(v); total > sb.MaxDataBytes {
			return nil, sb.Invalid("data", "data may hold at most %d bytes of keys and values.", sb.MaxDataBytes)
		}
		data[k] = v
	}
	return data, nil
}

// scalarString turns a JSON string, number or boolean into template text.
func scalarString(raw json.RawMessage) (string, bool) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case float64, bool:
		return string(raw), true
	}
	return "", false
}

// sendMessage accepts one outbound message (docs/api.md). A 429
// NEW_CONTACT_LIMIT carries Retry-After until the next UTC day, when the
// daily limit starts again.
func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	now := s.now().UTC().Truncate(time.Microsecond)
	err := s.send(w, r, p, now)
	if sb.ErrorCode(err) == sb.CodeNewContactLimit {
		w.Header().Set("Retry-After", strconv.Itoa(secondsToNextDay(now)))
		s.cfg.Metrics.refused("new_contacts")
	}
	return err
}

// requestHash identifies a request body for Idempotency-Key: the SHA-256 of
// the body as parsed JSON written again canonically (object keys sorted,
// no insignificant space, numbers as written), so that the same request
// with other spacing, key order or string escapes is the same request. A
// body that is not JSON is identified by its bytes.
func requestHash(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return sha256Hex(raw)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return sha256Hex(raw)
	}
	return sha256Hex(canon)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (s *Server) send(w http.ResponseWriter, r *http.Request, p *auth.Principal, now time.Time) error {
	ctx := r.Context()
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeReadError(err)
	}
	var idem *sb.IdempotencyRecord
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if len(key) > 255 {
			return sb.Invalid("Idempotency-Key", "The Idempotency-Key header must be at most 255 characters.")
		}
		idem = &sb.IdempotencyRecord{Key: key, RequestHash: requestHash(raw), RawHash: sha256Hex(raw)}
		prev, err := s.cfg.Store.Idempotency(ctx, p.Tenant.ID, p.Env, key, now)
		if err != nil {
			return err
		}
		if prev != nil {
			return replay(w, prev, idem)
		}
	}

	if err := notAForm(r, raw); err != nil {
		return err
	}
	var req sendRequest
	if err := decodeSend(raw, &req); err != nil {
		return err
	}
	m, err := s.accept(ctx, p, &req, idem, now)
	var rep *sqlstore.ErrReplay
	if errors.As(err, &rep) {
		return replay(w, rep.Record, idem)
	}
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if m.ScheduledAt != nil {
		status = http.StatusOK
	}
	writeRaw(w, status, renderSend(m))
	return nil
}

// accept checks a send in the documented order and stores the message it
// asks for (with its Idempotency-Key's record when idem is set).
func (s *Server) accept(ctx context.Context, p *auth.Principal, req *sendRequest, idem *sb.IdempotencyRecord, now time.Time) (*sb.Message, error) {
	data, err := req.validate()
	if err != nil {
		return nil, err
	}
	m := &sb.Message{ID: sb.NewID(), TenantID: p.Tenant.ID, Env: p.Env, Direction: sb.Outbound, To: *req.To,
		Status: sb.StatusQueued, CreatedAt: now, HighPriority: req.Priority != nil && *req.Priority == "high"}
	send := &sb.Send{Message: m, NewContactLimit: p.Plan.NewContactsPerDay}
	if req.From != nil {
		if err := s.checkFrom(ctx, p, *req.From); err != nil {
			return nil, err
		}
		send.From = *req.From
	}
	if req.Body != nil {
		m.Body = *req.Body
	} else {
		if m.Body, err = s.render(ctx, p, *req.Template, data); err != nil {
			return nil, err
		}
		m.Template = *req.Template
	}

	channel := sb.ChannelAuto
	if req.Channel != nil {
		channel = *req.Channel
	}
	if m.Channel, err = s.resolveChannel(ctx, p, m.To, channel); err != nil {
		// The API orders opt-out and the new-contact limit before
		// channel detection: report those first if they apply.
		if earlier := s.precheck(ctx, p, m.To, now); earlier != nil {
			return nil, earlier
		}
		return nil, err
	}
	send.Auto = channel == sb.ChannelAuto
	if send.Auto {
		m.TTL = sb.ChatFallbackAfter
		if req.TTL != nil {
			m.TTL = time.Duration(*req.TTL) * time.Second
		}
	}
	if until, quiet := s.cfg.Channels.QuietUntil(m.To, now); quiet {
		until = until.Truncate(time.Microsecond)
		m.ScheduledAt = &until
	}
	if idem != nil {
		idem.Status = http.StatusAccepted
		if m.ScheduledAt != nil {
			idem.Status = http.StatusOK
		}
		send.Idempotency = idem
		send.Render = func(m *sb.Message) []byte { return renderSend(m) }
	}
	if err := s.cfg.Store.AcceptSend(ctx, send); err != nil {
		return nil, err
	}
	return m, nil
}

// SendInput is a send made outside the API (the dashboard's send form):
// empty strings are fields left out.
type SendInput struct {
	To, Body, Template string
	Data               map[string]string
	Channel, From      string
}

// Send accepts a message for p exactly as POST /v1/messages does (the same
// checks, errors and phone choice), without an Idempotency-Key; a message
// accepted during quiet hours has ScheduledAt set. The rate limit and the
// monthly quota, which count API requests, do not apply.
func (s *Server) Send(ctx context.Context, p *auth.Principal, in SendInput) (*sb.Message, error) {
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	req := sendRequest{To: &in.To, Body: opt(in.Body), Template: opt(in.Template), Channel: opt(in.Channel), From: opt(in.From)}
	if in.Data != nil {
		req.Data = make(map[string]json.RawMessage, len(in.Data))
		for k, v := range in.Data {
			req.Data[k], _ = json.Marshal(v)
		}
	}
	return s.accept(ctx, p, &req, nil, s.now().UTC().Truncate(time.Microsecond))
}

func renderSend(m *sb.Message) []byte {
	if b, ok := appendSend(make([]byte, 0, 256), m); ok {
		return b
	}
	body := dataBody{Data: sendJSON{MessageID: m.ID, Status: m.Status, From: m.From, To: m.To, Channel: m.Channel,
		Livemode: m.Env == sb.Live, CreatedAt: m.CreatedAt, ScheduledAt: m.ScheduledAt}}
	if m.ScheduledAt != nil {
		body.Code = sb.CodeQuietHours
	}
	b, _ := json.Marshal(body)
	return append(b, '\n')
}

// appendSend is renderSend for the answer every send gets, written by hand
// (json.Marshal's reflection was a tenth of the send handler's CPU): the
// same bytes as json.Marshal, as TestRenderSend checks. It declines (false)
// a string that json.Marshal would escape.
func appendSend(b []byte, m *sb.Message) ([]byte, bool) {
	for _, s := range []string{m.ID, m.Status, m.From, m.To, m.Channel} {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return nil, false
			}
		}
	}
	b = append(b, `{"data":{"message_id":"`...)
	b = append(b, m.ID...)
	b = append(b, `","status":"`...)
	b = append(b, m.Status...)
	b = append(b, `","from":"`...)
	b = append(b, m.From...)
	b = append(b, `","to":"`...)
	b = append(b, m.To...)
	b = append(b, `","channel":"`...)
	b = append(b, m.Channel...)
	b = append(b, `","livemode":`...)
	b = strconv.AppendBool(b, m.Env == sb.Live)
	b = append(b, `,"created_at":"`...)
	b = m.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","scheduled_at":`...)
	if m.ScheduledAt == nil {
		b = append(b, `null}}`...)
	} else {
		b = append(b, '"')
		b = m.ScheduledAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `"},"code":"`...)
		b = append(b, sb.CodeQuietHours...)
		b = append(b, `"}`...)
	}
	return append(b, '\n'), true
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = []string{"application/json"}
	w.WriteHeader(status)
	w.Write(body)
}

// replay answers a repeated Idempotency-Key: the first answer when the
// request is the same, IDEMPOTENCY_CONFLICT when it is not.
func replay(w http.ResponseWriter, prev, cur *sb.IdempotencyRecord) error {
	if !prev.SameRequest(cur) {
		return sb.Errorf(sb.CodeIdempotencyConflict, "This Idempotency-Key was already used with a different request body.")
	}
	w.Header().Set("Idempotent-Replayed", "true")
	writeRaw(w, prev.Status, prev.Response)
	return nil
}

func (s *Server) checkFrom(ctx context.Context, p *auth.Principal, from string) error {
	phones, err := s.cfg.Store.Phones(ctx, p.Tenant.ID, p.Env)
	if err != nil {
		return err
	}
	for _, ph := range phones {
		if ph.Number == from {
			return nil
		}
	}
	return sb.Invalid("from", "from must be one of your sending phone numbers.")
}

func (s *Server) render(ctx context.Context, p *auth.Principal, name string, data map[string]string) (string, error) {
	t, err := s.cfg.Store.TemplateByName(ctx, p.Tenant.ID, p.Env, name)
	if sb.ErrorCode(err) == sb.CodeNotFound {
		return "", errNoTemplate(name, p.Env)
	}
	if err != nil {
		return "", err
	}
	parsed, err := tmpl.Parse(t.Body)
	if err != nil {
		return "", fmt.Errorf("stored template %s does not parse: %w", t.ID, err)
	}
	body, err := parsed.Render(data)
	var missing *tmpl.MissingVarError
	var tooLong *tmpl.TooLongError
	switch {
	case errors.As(err, &missing):
		return "", &sb.Error{Code: sb.CodeMissingTemplateVar, Message: fmt.Sprintf("The template needs a value for {{%s}} in data.", missing.Name),
			Details: map[string]any{"field": "data." + missing.Name}}
	case errors.As(err, &tooLong):
		return "", sb.Invalid("data", "The rendered message would be longer than %d characters.", tooLong.Limit)
	case err != nil:
		return "", err
	}
	return body, nil
}

// errNoTemplate is INVALID_TEMPLATE for a name that names no template of
// the environment; templates of the other environment are not seen (a
// template made with a live key does not exist for a test key).
func errNoTemplate(name string, env sb.Environment) error {
	return sb.Errorf(sb.CodeInvalidTemplate, "No template named %q exists in the %s environment (templates are separate for live and test keys).", clip(name, 80), env)
}

// resolveChannel returns the channel the message will use: chat only when
// the chat engine is up; for auto, what detection says, or sms when
// detection is down and none of the tenant's phones sends chat anyway. The
// store makes auto's chat sms when no phone that sends chat is available
// (sb.Send.Auto).
func (s *Server) resolveChannel(ctx context.Context, p *auth.Principal, to, channel string) (string, error) {
	switch channel {
	case sb.ChannelSMS:
		return sb.ChannelSMS, nil
	case sb.ChannelChat:
		if err := s.cfg.Channels.ChatAvailable(ctx, p.Tenant.ID, p.Env); err != nil {
			return "", err
		}
		return sb.ChannelChat, nil
	}
	ch, err := s.cfg.Channels.Detect(ctx, p.Tenant.ID, p.Env, to)
	if sb.ErrorCode(err) == sb.CodeDetectionUnavailable {
		phones, perr := s.cfg.Store.Phones(ctx, p.Tenant.ID, p.Env)
		if perr != nil {
			return "", perr
		}
		for _, ph := range sb.LiveSenders(p.Env, phones) { // a skipped simulated phone sends nothing
			if ph.HasChannel(sb.ChannelChat) {
				return "", err
			}
		}
		return sb.ChannelSMS, nil
	}
	return ch, err
}

// precheck returns RECIPIENT_OPTED_OUT or NEW_CONTACT_LIMIT when either
// applies now. The store checks both again, authoritatively, when it
// accepts the message.
func (s *Server) precheck(ctx context.Context, p *auth.Principal, to string, now time.Time) error {
	known, optedOut, err := s.cfg.Store.Recipient(ctx, p.Tenant.ID, p.Env, to)
	if err != nil {
		return err
	}
	if optedOut {
		return sb.Errorf(sb.CodeRecipientOptedOut, "The recipient opted out (sent STOP) and has not opted back in (START).")
	}
	if !known && p.Plan.NewContactsPerDay > 0 {
		n, err := s.cfg.Store.NewContactsToday(ctx, p.Tenant.ID, p.Env, sb.Day(now))
		if err != nil {
			return err
		}
		if n >= int64(p.Plan.NewContactsPerDay) {
			return sb.Errorf(sb.CodeNewContactLimit, "The daily limit of %d new recipients is reached; messages to known recipients are still allowed.", p.Plan.NewContactsPerDay)
		}
	}
	return nil
}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	m, err := s.cfg.Store.Message(r.Context(), p.Tenant.ID, p.Env, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, toMessageJSON(m))
	return nil
}

// messageFilters are the query parameters of GET /v1/messages.
var messageFilters = append([]string{"status", "direction", "to", "from", "campaign_id", "created_after", "created_before"}, pageParams...)

// listMessages lists the environment's messages, newest first, filtered by
// status, direction, to, from, campaign and a created_at range.
func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	pg, err := page(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := sb.MessageFilter{Status: q.Get("status"), Direction: q.Get("direction"), CampaignID: q.Get("campaign_id")}
	switch f.Status {
	case "", sb.StatusQueued, sb.StatusSent, sb.StatusDelivered, sb.StatusFailed, sb.StatusReceived:
	default:
		return sb.Invalid("status", "status must be one of queued, sent, delivered, failed, received.")
	}
	switch f.Direction {
	case "", sb.Outbound, sb.Inbound:
	default:
		return sb.Invalid("direction", "direction must be outbound or inbound.")
	}
	if f.To, err = phoneParam(r, "to"); err != nil {
		return err
	}
	if f.From, err = phoneParam(r, "from"); err != nil {
		return err
	}
	if f.CampaignID != "" && !sb.ValidID(f.CampaignID) {
		return sb.Invalid("campaign_id", "campaign_id must be a campaign's id (26 characters), not %q.", clip(f.CampaignID, 40))
	}
	for _, b := range []struct {
		name string
		t    **time.Time
	}{{"created_after", &f.CreatedAfter}, {"created_before", &f.CreatedBefore}} {
		if v := q.Get(b.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return sb.Invalid(b.name, "%s must be an RFC 3339 time such as 2026-01-31T12:00:00Z (in a query string, write a + offset as %%2B).", b.name)
			}
			t = t.UTC()
			*b.t = &t
		}
	}
	ms, err := s.cfg.Store.Messages(r.Context(), p.Tenant.ID, p.Env, f, pg)
	if err != nil {
		return err
	}
	ms = setNextLink(w, r, pg, ms, func(m *sb.Message) string { return m.ID })
	out := make([]messageJSON, len(ms))
	for i, m := range ms {
		out[i] = toMessageJSON(m)
	}
	writeData(w, http.StatusOK, out)
	return nil
}

type inboundRequest struct {
	From *string `json:"from"`
	To   *string `json:"to"`
	Body *string `json:"body"`
}

// testInbound simulates a recipient writing to one of the tenant's numbers
// (docs/api.md).
func (s *Server) testInbound(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var req inboundRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.From == nil || *req.From == "":
		return sb.Invalid("from", "from is required.")
	case req.Body == nil || *req.Body == "" || utf8.RuneCountInString(*req.Body) > sb.MaxBodyLength:
		return sb.Invalid("body", "body must be 1 to %d characters.", sb.MaxBodyLength)
	case !phonenum.Valid(*req.From):
		return sb.InvalidPhone("from", "from must be an E.164 number: + and 10 to 15 digits.")
	case req.To != nil && !phonenum.Valid(*req.To):
		return sb.InvalidPhone("to", "to must be an E.164 number: + and 10 to 15 digits.")
	}
	phones, err := s.cfg.Store.Phones(r.Context(), p.Tenant.ID, p.Env)
	if err != nil {
		return err
	}
	var phone *sb.Phone
	for _, ph := range phones {
		if req.To == nil || ph.Number == *req.To {
			phone = ph
			break
		}
	}
	if phone == nil {
		if len(phones) == 0 {
			return sb.Invalid("to", "The tenant has no phone for the text to reach; add one first (POST /v1/phones).")
		}
		return sb.Invalid("to", "to must be one of your phone numbers.")
	}
	if p.Env == sb.Live && phone.Kind != sb.PhoneSimulated {
		// A live text to a real phone comes from the phone itself: a live
		// key may not make one up (and with it forge STOP or START, or
		// make a number known).
		return sb.Errorf(sb.CodeForbidden, "With a live key, simulated inbound texts can reach only simulated phones; %s is a real phone.", phone.Number)
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	m := &sb.Message{ID: sb.NewID(), TenantID: p.Tenant.ID, Env: p.Env, Direction: sb.Inbound, From: *req.From, To: phone.Number,
		Body: *req.Body, Channel: sb.ChannelSMS, Status: sb.StatusReceived, PhoneID: phone.ID, CreatedAt: now}
	if err := s.cfg.Store.Inbound(r.Context(), m); err != nil {
		return err
	}
	writeData(w, http.StatusOK, toMessageJSON(m))
	return nil
}

type simulatorRequest struct {
	ChatEngine *string `json:"chat_engine"`
}

// testSimulator takes the simulated chat engine of the caller's tenant and
// environment down or up: a test key's switch never reaches live traffic.
func (s *Server) testSimulator(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var req simulatorRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.ChatEngine == nil || (*req.ChatEngine != "up" && *req.ChatEngine != "down") {
		return sb.Invalid("chat_engine", `chat_engine must be "up" or "down".`)
	}
	s.cfg.Channels.SetChatDown(p.Tenant.ID, p.Env, *req.ChatEngine == "down")
	writeData(w, http.StatusOK, map[string]string{"chat_engine": *req.ChatEngine})
	return nil
}
