// Package bbtest is a small BlueBubbles server for tests: a real HTTP
// server on loopback speaking the part of BlueBubbles' REST API that
// Switchboard uses, with each address scripted (has iMessage, has not,
// down, slow), and its webhooks posted on demand.
//
// Sources, in BlueBubblesApp/bluebubbles-server, packages/server/src/server:
//   - api/http/api/v1/httpRoutes.ts: GET /api/v1/ping, GET
//     /api/v1/handle/availability/imessage (validators
//     HandleValidator.validateAvailability: address required), POST
//     /api/v1/message/text.
//   - api/http/api/v1/middleware/authMiddleware.ts: the password in the
//     query as guid, password or token; missing: 401 "Missing server
//     password!"; wrong: 401.
//   - api/http/api/v1/routers/generalRouter.ts: ping answers data "pong".
//   - api/http/api/v1/routers/handleRouter.ts getMessagesAvailability:
//     {data: {available}}.
//   - api/http/api/v1/validators/messageValidator.ts sendTextRules:
//     chatGuid required, tempGuid, message, method apple-script or
//     private-api; apple-script needs a tempGuid and a message; a tempGuid
//     still being sent: 400 "Message is already queued to be sent!".
//   - api/http/api/v1/responses (success.ts, errors.ts): {status, message,
//     data} and {status, message, error: {type, message}}.
//   - api/serializers/MessageSerializer.ts: guid, tempGuid, text, handle
//     {address}, isFromMe, dateCreated, dateDelivered, dateRead (Unix
//     milliseconds), error.
//   - services/webhookService: POST {type, data} as JSON, no signature;
//     events.ts: new-message, updated-message.
package bbtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Behaviour is how the fake answers for one address.
type Behaviour int

// Behaviours.
const (
	HasIMessage Behaviour = iota
	NoIMessage
	// Down: 500 for availability and sends (the Private API is off, or
	// Messages is stuck).
	Down
	// Slow: answers after Delay.
	Slow
)

// Sent is a text the fake took.
type Sent struct {
	ChatGUID, TempGUID, Text, GUID string
}

// Server is the fake BlueBubbles server.
type Server struct {
	*httptest.Server
	Password string
	Delay    time.Duration

	mu        sync.Mutex
	addresses map[string]Behaviour
	sent      []Sent
	checks    int
	n         int
}

// New starts a fake with the server password password.
func New(password string) *Server {
	s := &Server{Password: password, Delay: 5 * time.Second, addresses: map[string]Behaviour{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Script sets how the fake answers for address.
func (s *Server) Script(address string, b Behaviour) {
	s.mu.Lock()
	s.addresses[address] = b
	s.mu.Unlock()
}

// Sent returns the texts taken so far.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// Checks is how many availability checks the fake answered.
func (s *Server) Checks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checks
}

func reply(w http.ResponseWriter, status int, message string, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body := map[string]any{"status": status, "message": message}
	if status >= 400 {
		typ := "Server Error"
		if status < 500 {
			typ = "Validation Error"
		}
		if status == 401 {
			typ = "Authentication Error"
		}
		body["error"] = map[string]any{"type": typ, "message": data}
	} else if data != nil {
		body["data"] = data
	}
	json.NewEncoder(w).Encode(body)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	token := q.Get("guid")
	if token == "" {
		token = q.Get("password")
	}
	if token == "" {
		token = q.Get("token")
	}
	if token == "" {
		reply(w, 401, "You are not authorized to access this resource", "Missing server password!")
		return
	}
	if strings.TrimSpace(token) != strings.TrimSpace(s.Password) {
		reply(w, 401, "You are not authorized to access this resource", "You are not authorized to access this resource")
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/ping":
		reply(w, 200, "Ping received!", "pong")
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/handle/availability/imessage":
		addr := q.Get("address")
		if addr == "" {
			reply(w, 400, "Bad Request", "address: The address field is required.")
			return
		}
		s.mu.Lock()
		s.checks++
		b := s.addresses[addr]
		s.mu.Unlock()
		switch b {
		case Down:
			reply(w, 500, "Internal Server Error", "Failed to check availability")
		case Slow:
			select {
			case <-time.After(s.Delay):
			case <-r.Context().Done():
			}
			reply(w, 200, "Success", map[string]any{"available": true})
		default:
			reply(w, 200, "Success", map[string]any{"available": b == HasIMessage})
		}
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/message/text":
		var body struct {
			ChatGUID string  `json:"chatGuid"`
			TempGUID string  `json:"tempGuid"`
			Message  *string `json:"message"`
			Method   string  `json:"method"`
		}
		if json.NewDecoder(r.Body).Decode(&body) != nil || body.ChatGUID == "" {
			reply(w, 400, "Bad Request", "chatGuid: The chatGuid field is required.")
			return
		}
		if body.Method == "" {
			body.Method = "apple-script"
		}
		if body.Method == "apple-script" && body.TempGUID == "" {
			reply(w, 400, "Bad Request", "A 'tempGuid' is required when sending via AppleScript")
			return
		}
		if body.Message == nil || *body.Message == "" {
			reply(w, 400, "Bad Request", "A 'message' is required when sending via AppleScript")
			return
		}
		addr := body.ChatGUID[strings.LastIndex(body.ChatGUID, ";")+1:]
		s.mu.Lock()
		b := s.addresses[addr]
		for _, x := range s.sent {
			if x.TempGUID == body.TempGUID {
				s.mu.Unlock()
				reply(w, 400, "Bad Request", "Message is already queued to be sent! (Temp GUID: "+body.TempGUID+")")
				return
			}
		}
		s.mu.Unlock()
		if b == Down {
			reply(w, 500, "Internal Server Error", "Failed to send message")
			return
		}
		s.mu.Lock()
		s.n++
		guid := fmt.Sprintf("p:0/%08X-0000-4000-8000-%012d", s.n, s.n)
		s.sent = append(s.sent, Sent{ChatGUID: body.ChatGUID, TempGUID: body.TempGUID, Text: *body.Message, GUID: guid})
		s.mu.Unlock()
		reply(w, 200, "Message sent!", map[string]any{"guid": guid, "tempGuid": body.TempGUID, "text": *body.Message,
			"isFromMe": true, "dateCreated": time.Now().UnixMilli(), "dateDelivered": nil, "dateRead": nil, "error": 0,
			"handle": map[string]any{"address": addr}})
	default:
		reply(w, 404, "Not Found", "Route not found")
	}
}

// Post sends a webhook event {type, data} to url as BlueBubbles does (no
// signature) and returns the answer's status.
func Post(url, typ string, data map[string]any) (int, error) {
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	res, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// Delivered is an updated-message of a sent message: delivered, and read
// when read.
func Delivered(guid string, read bool) map[string]any {
	now := time.Now().UnixMilli()
	d := map[string]any{"guid": guid, "isFromMe": true, "dateDelivered": now, "dateRead": nil, "error": 0}
	if read {
		d["dateRead"] = now
	}
	return d
}

// Incoming is a new-message from address.
func Incoming(address, text string) map[string]any {
	return map[string]any{"guid": fmt.Sprintf("in-%d", time.Now().UnixNano()), "text": text, "isFromMe": false,
		"dateCreated": time.Now().UnixMilli(), "handle": map[string]any{"address": address}, "error": 0}
}
