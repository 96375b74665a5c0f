// Package twiliotest is a small Twilio for tests: an HTTP server with the
// endpoints of Twilio's API that the twilio link uses (the account check
// and Messages.json, behind HTTP Basic authentication), which records what
// it is sent and answers as a test decides, and which makes Twilio's
// requests back (status callbacks, inbound texts) signed with
// X-Twilio-Signature, as Twilio does. It is not a Twilio emulator.
package twiliotest

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/provider/twilio"
)

// Message is a message the API was asked to send.
type Message struct {
	SID                            string
	To, From, Body, StatusCallback string
	At                             time.Time
}

// Reply is how the API answers a Messages.json request.
type Reply struct {
	// Status is the HTTP status (default 201).
	Status int
	// Code and Text make a Twilio error body (for 4xx and 5xx).
	Code int
	Text string
	// RetryAfter sets the Retry-After header, in seconds.
	RetryAfter int
	// MessageStatus is the status in a 201 body (default "queued").
	MessageStatus string
	// NoSID leaves the sid out of a 2xx body (Twilio took the message).
	NoSID bool
	// Before is called with the message's SID before the answer is
	// written (a callback racing the answer, say).
	Before func(sid string)
}

// Server is the fake Twilio.
type Server struct {
	AccountSID, AuthToken string
	// OnMessage decides each answer (nil: 201 queued).
	OnMessage func(*Message) Reply
	// Client makes the callbacks; its transport reaches Switchboard's
	// public URL (tests map the public host onto the test server).
	Client *http.Client

	srv *httptest.Server

	mu       sync.Mutex
	messages []*Message
	attempts int
	authFail int
}

// Start serves on 127.0.0.1.
func (s *Server) Start() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2010-04-01/Accounts/{sid}", s.account)
	mux.HandleFunc("POST /2010-04-01/Accounts/{sid}/Messages.json", s.create)
	s.srv = httptest.NewServer(mux)
	if s.Client == nil {
		s.Client = &http.Client{Timeout: 10 * time.Second}
	}
}

// URL is the base URL of the API (the link's base_url).
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) authorized(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	good := ok && subtle.ConstantTimeCompare([]byte(user), []byte(s.AccountSID)) == 1 &&
		subtle.ConstantTimeCompare([]byte(pass), []byte(s.AuthToken)) == 1
	if !good {
		s.mu.Lock()
		s.authFail++
		s.mu.Unlock()
	}
	return good
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) account(w http.ResponseWriter, r *http.Request) {
	sid := strings.TrimSuffix(r.PathValue("sid"), ".json")
	if !s.authorized(r) || sid != s.AccountSID {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 20003, "message": "Authenticate", "status": 401})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sid": s.AccountSID, "status": "active"})
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) || r.PathValue("sid") != s.AccountSID {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 20003, "message": "Authenticate", "status": 401})
		return
	}
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 20001, "message": "bad form", "status": 400})
		return
	}
	m := &Message{SID: newSID(), To: r.PostForm.Get("To"), From: r.PostForm.Get("From"), Body: r.PostForm.Get("Body"),
		StatusCallback: r.PostForm.Get("StatusCallback"), At: time.Now()}
	reply := Reply{}
	if s.OnMessage != nil {
		reply = s.OnMessage(m)
	}
	s.mu.Lock()
	s.attempts++
	if reply.Status == 0 || reply.Status/100 == 2 {
		s.messages = append(s.messages, m)
	}
	s.mu.Unlock()
	if reply.Before != nil {
		reply.Before(m.SID)
	}
	if reply.Status != 0 && reply.Status/100 != 2 {
		if reply.RetryAfter > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(reply.RetryAfter))
		}
		writeJSON(w, reply.Status, map[string]any{"code": reply.Code, "message": reply.Text, "more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", reply.Code), "status": reply.Status})
		return
	}
	status := reply.MessageStatus
	if status == "" {
		status = "queued"
	}
	out := map[string]any{"sid": m.SID, "account_sid": s.AccountSID, "to": m.To, "from": m.From, "body": m.Body,
		"status": status, "num_segments": "1", "direction": "outbound-api", "error_code": nil, "error_message": nil, "api_version": "2010-04-01"}
	if reply.NoSID {
		delete(out, "sid")
	}
	writeJSON(w, http.StatusCreated, out)
}

func newSID() string {
	var b [16]byte
	rand.Read(b[:])
	return "SM" + hex.EncodeToString(b[:])
}

// Messages returns the messages accepted so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.messages))
	for i, m := range s.messages {
		out[i] = *m
	}
	return out
}

// Attempts is how many Messages.json requests came, answered or refused.
func (s *Server) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// Find returns the accepted message with body, if any.
func (s *Server) Find(body string) (Message, bool) {
	for _, m := range s.Messages() {
		if m.Body == body {
			return m, true
		}
	}
	return Message{}, false
}

// Post makes a request as Twilio does: a form POST to target, signed with
// the auth token (or with token, when it is not empty: a forgery). It
// returns the answer's status and body.
func (s *Server) Post(ctx context.Context, target string, form url.Values, token string) (int, string, error) {
	if token == "" {
		token = s.AuthToken
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", twilio.Signature(token, target, form))
	res, err := s.Client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), nil
}

// Callback posts a status callback about m to its StatusCallback.
func (s *Server) Callback(ctx context.Context, m Message, status, errorCode string) (int, error) {
	form := url.Values{"MessageSid": {m.SID}, "SmsSid": {m.SID}, "AccountSid": {s.AccountSID}, "From": {m.From}, "To": {m.To},
		"MessageStatus": {status}, "SmsStatus": {status}, "ApiVersion": {"2010-04-01"}}
	if errorCode != "" {
		form.Set("ErrorCode", errorCode)
	}
	code, _, err := s.Post(ctx, m.StatusCallback, form, "")
	return code, err
}

// Inbound posts a text from to the link's number to, as Twilio posts to a
// number's "A message comes in" webhook at target.
func (s *Server) Inbound(ctx context.Context, target, from, to, body, token string) (int, string, error) {
	sid := newSID()
	form := url.Values{"MessageSid": {sid}, "SmsMessageSid": {sid}, "SmsSid": {sid}, "AccountSid": {s.AccountSID}, "From": {from}, "To": {to},
		"Body": {body}, "NumMedia": {"0"}, "NumSegments": {"1"}, "SmsStatus": {"received"}, "ApiVersion": {"2010-04-01"}}
	return s.Post(ctx, target, form, token)
}

// InboundForm posts form as an inbound text to target, signed.
func (s *Server) InboundForm(ctx context.Context, target string, form url.Values) (int, string, error) {
	return s.Post(ctx, target, form, "")
}

// MapHost returns a client whose connections to host (the public URL's
// host:port) go to addr instead, as a reverse proxy in front of
// Switchboard would send them.
func MapHost(host, addr string) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			if a == host {
				a = addr
			}
			return d.DialContext(ctx, network, a)
		},
	}}
}
