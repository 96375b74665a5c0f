// Package rbmtest is a small RCS Business Messaging API for tests: a real
// HTTP server on loopback that speaks the part of Google's RBM API that
// Switchboard uses, written from the published description, with each
// number scripted (RCS-capable, not capable, agent not launched, down,
// slow, throttled).
//
// Sources, in google-business-communications' clients
// (java-rcsbusinessmessaging, proto/google/communications/
// rcsbusinessmessaging/v1/rbm.proto) and the REST reference
// (developers.google.com/business-communications/rcs-business-messaging/
// reference/rest):
//   - GetCapabilities: GET /v1/{name=phones/*}/capabilities with requestId;
//     "If the user can't be reached with RBM, the RBM platform returns 404
//     NOT_FOUND"; "If an unlaunched agent requests the capabilities of a
//     non-tester, the RBM platform returns 403 PERMISSION_DENIED"; the
//     answer is Capabilities {features}.
//   - BatchGetUsers: POST /v1/users:batchGet, body {users}, answer
//     BatchGetUsersResponse {reachableUsers, totalRandomSampleUserCount,
//     reachableRandomSampleUserCount} (the sample counts are 0 under 500
//     numbers).
//   - CreateAgentMessage: POST /v1/{parent=phones/*}/agentMessages with
//     messageId (a UUID) and the body an AgentMessage {contentMessage:
//     {text}}; the answer is the AgentMessage with name
//     "phones/{E.164}/agentMessages/{messageId}" and sendTime. "The RBM
//     platform ignores any agent message sent with an ID that was used by
//     an earlier message": here a repeat answers 409 ALREADY_EXISTS and
//     sends nothing.
//   - DeleteAgentMessage (the revoke): DELETE
//     /v1/{name=phones/*/agentMessages/*} with agentId, an empty body (REST
//     reference, phones.agentMessages.delete: "If the RCS for Business
//     platform successfully revokes a message, then the message is deleted
//     from the user's message queue and is never delivered (200 OK). A 404
//     Not Found response means the revocation attempt has failed because
//     the message was delivered."; the answer on success is an empty JSON
//     object). The "Revoke messages" guide (guides/build/messages/revoke)
//     and the samples' rbmApiHelper.revokeMessage make it the step before
//     "an alternate channel like SMS". Here a message Deliver was called
//     for answers 404, a pending one 200 once (it is then gone: a second
//     revoke answers 404, as an id the platform no longer holds), and an
//     unknown id 404.
//   - Errors: Google's JSON error {"error": {code, message, status}}.
//   - OAuth 2: the JWT bearer grant (RFC 7523) at the key file's token_uri,
//     as golang.org/x/oauth2/jwt makes it; the API wants its access token.
//   - Events (the webhooks guide): POST to the agent's webhook with
//     {"message": {"data": base64(event JSON), messageId, publishTime}},
//     X-Goog-Signature = base64(HMAC-SHA512(clientToken, decoded data)); the
//     webhook set-up posts {clientToken, secret} and wants the secret back.
//     User events carry senderPhoneNumber, eventType (DELIVERED, READ,
//     IS_TYPING), eventId, messageId, sendTime, agentId; user messages
//     senderPhoneNumber, messageId, sendTime, text, agentId.
package rbmtest

import (
	"bytes"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Behaviour is how the fake answers for one number.
type Behaviour int

// Behaviours.
const (
	// Capable: capabilities 200, sends accepted, listed by batchGet.
	Capable Behaviour = iota
	// NotCapable: 404 NOT_FOUND (not reachable by RCS).
	NotCapable
	// NotLaunched: 403 PERMISSION_DENIED (the agent is not launched on the
	// user's carrier and the user is not a tester).
	NotLaunched
	// Down: 503 UNAVAILABLE.
	Down
	// Slow: answers after Delay (or when the request is given up).
	Slow
	// Throttled: 429 RESOURCE_EXHAUSTED.
	Throttled
)

// Sent is an agent message the fake accepted.
type Sent struct {
	To, MessageID, Text string
}

// Server is the fake RBM API and its token endpoint.
type Server struct {
	*httptest.Server
	AgentID string
	// Delay is how long a Slow number waits (default 5s).
	Delay time.Duration

	key *rsa.PrivateKey

	mu        sync.Mutex
	numbers   map[string]Behaviour
	all       *Behaviour
	tokens    map[string]bool
	sent      []Sent
	seenIDs   map[string]bool
	delivered map[string]bool // message ids the user's device received
	revoked   map[string]bool
	requests  map[string]int // "GET capabilities" etc. -> count
	tokenHits int
}

// New starts a fake for agentID.
func New(agentID string) *Server {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	s := &Server{AgentID: agentID, Delay: 5 * time.Second, key: key, numbers: map[string]Behaviour{},
		tokens: map[string]bool{}, seenIDs: map[string]bool{}, delivered: map[string]bool{}, revoked: map[string]bool{}, requests: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Script sets how the fake answers for number.
func (s *Server) Script(number string, b Behaviour) {
	s.mu.Lock()
	s.numbers[number] = b
	s.mu.Unlock()
}

// ScriptAll sets one behaviour for every number (nil: back to each
// number's own).
func (s *Server) ScriptAll(b *Behaviour) {
	s.mu.Lock()
	s.all = b
	s.mu.Unlock()
}

func (s *Server) behaviour(number string) Behaviour {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.all != nil {
		return *s.all
	}
	return s.numbers[number]
}

// Requests returns how many requests of a kind ("capabilities", "batchGet",
// "agentMessages", "revoke", "token") the fake received.
func (s *Server) Requests(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kind == "token" {
		return s.tokenHits
	}
	return s.requests[kind]
}

// Sent returns the agent messages accepted so far.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// KeyFile is a service account's JSON key, as the Google Cloud console
// gives it, whose token_uri is the fake's token endpoint.
func (s *Server) KeyFile() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(s.key)
	if err != nil {
		panic(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     "rbm-test",
		"private_key_id": "fake-key-1",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   "agent@rbm-test.iam.gserviceaccount.com",
		"client_id":      "1",
		"token_uri":      s.URL + "/token",
	})
	return b
}

func writeError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		s.token(w, r)
		return
	}
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	known := ok && s.tokens[auth]
	s.mu.Unlock()
	if !known {
		writeError(w, 401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/users:batchGet":
		s.count("batchGet")
		var req struct {
			Users []string `json:"users"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Users) == 0 || len(req.Users) > 10000 {
			writeError(w, 400, "INVALID_ARGUMENT", "users: between 1 and 10000 phone numbers")
			return
		}
		reach := []string{}
		for _, u := range req.Users {
			switch s.behaviour(u) {
			case Down:
				writeError(w, 503, "UNAVAILABLE", "The service is currently unavailable.")
				return
			case Capable:
				reach = append(reach, u)
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"reachableUsers": reach, "totalRandomSampleUserCount": 0, "reachableRandomSampleUserCount": 0})
	case strings.HasPrefix(r.URL.Path, "/v1/phones/"):
		rest := strings.TrimPrefix(r.URL.Path, "/v1/phones/")
		number, what, _ := strings.Cut(rest, "/")
		if !strings.HasPrefix(number, "+") {
			writeError(w, 400, "INVALID_ARGUMENT", "The phone number must be in E.164 format.")
			return
		}
		if r.URL.Query().Get("agentId") != s.AgentID {
			writeError(w, 403, "PERMISSION_DENIED", "The caller does not have permission")
			return
		}
		if !s.scripted(w, r, number) {
			return
		}
		switch {
		case r.Method == http.MethodGet && what == "capabilities":
			s.count("capabilities")
			json.NewEncoder(w).Encode(map[string]any{"features": []string{"RICHCARD_STANDALONE", "RICHCARD_CAROUSEL", "ACTION_DIAL"}})
		case r.Method == http.MethodPost && what == "agentMessages":
			s.count("agentMessages")
			s.agentMessage(w, r, number)
		case r.Method == http.MethodDelete && strings.HasPrefix(what, "agentMessages/"):
			s.count("revoke")
			s.revoke(w, number, strings.TrimPrefix(what, "agentMessages/"))
		default:
			writeError(w, 404, "NOT_FOUND", "Method not found.")
		}
	default:
		writeError(w, 404, "NOT_FOUND", "Method not found.")
	}
}

func (s *Server) count(kind string) {
	s.mu.Lock()
	s.requests[kind]++
	s.mu.Unlock()
}

// scripted answers for a number scripted to fail, and reports whether the
// request goes on.
func (s *Server) scripted(w http.ResponseWriter, r *http.Request, number string) bool {
	switch s.behaviour(number) {
	case NotCapable:
		s.count("refused")
		writeError(w, 404, "NOT_FOUND", "Requested entity was not found.")
	case NotLaunched:
		s.count("refused")
		writeError(w, 403, "PERMISSION_DENIED", "Agent is not launched on the user's carrier.")
	case Down:
		s.count("refused")
		writeError(w, 503, "UNAVAILABLE", "The service is currently unavailable.")
	case Throttled:
		s.count("refused")
		writeError(w, 429, "RESOURCE_EXHAUSTED", "Quota exceeded.")
	case Slow:
		select {
		case <-time.After(s.Delay):
		case <-r.Context().Done():
		}
		return true
	default:
		return true
	}
	return false
}

func (s *Server) agentMessage(w http.ResponseWriter, r *http.Request, number string) {
	id := r.URL.Query().Get("messageId")
	if len(id) != 36 || strings.Count(id, "-") != 4 {
		writeError(w, 400, "INVALID_ARGUMENT", "messageId must be a UUID")
		return
	}
	var msg struct {
		ContentMessage *struct {
			Text string `json:"text"`
		} `json:"contentMessage"`
	}
	if json.NewDecoder(r.Body).Decode(&msg) != nil || msg.ContentMessage == nil || msg.ContentMessage.Text == "" {
		writeError(w, 400, "INVALID_ARGUMENT", "contentMessage is required")
		return
	}
	s.mu.Lock()
	dup := s.seenIDs[id]
	if !dup {
		s.seenIDs[id] = true
		s.sent = append(s.sent, Sent{To: number, MessageID: id, Text: msg.ContentMessage.Text})
	}
	s.mu.Unlock()
	if dup {
		writeError(w, 409, "ALREADY_EXISTS", "Message with the same ID already exists.")
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"name": "phones/" + number + "/agentMessages/" + id,
		"sendTime": time.Now().UTC().Format(time.RFC3339Nano), "contentMessage": msg.ContentMessage})
}

// Deliver marks the agent message messageID as delivered to the user's
// device: a revoke of it answers 404 from now on.
func (s *Server) Deliver(messageID string) {
	s.mu.Lock()
	s.delivered[messageID] = true
	s.mu.Unlock()
}

// Revoked reports whether the agent message messageID was revoked.
func (s *Server) Revoked(messageID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revoked[messageID]
}

// revoke answers DeleteAgentMessage: 200 {} for a message sent to number
// and still pending (it is revoked: never delivered), 404 NOT_FOUND for one
// delivered, revoked already, or never sent.
func (s *Server) revoke(w http.ResponseWriter, number, id string) {
	s.mu.Lock()
	pending := false
	if !s.delivered[id] && !s.revoked[id] {
		for _, m := range s.sent {
			if m.MessageID == id && m.To == number {
				pending = true
			}
		}
	}
	if pending {
		s.revoked[id] = true
	}
	s.mu.Unlock()
	if !pending {
		writeError(w, 404, "NOT_FOUND", "Requested entity was not found.")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	io.WriteString(w, "{}")
}

// token answers the JWT bearer grant: the assertion must be signed with
// the key file's key, for the token endpoint, with the RBM scope.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.tokenHits++
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
		return
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
		return
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err != nil || rsa.VerifyPKCS1v15(&s.key.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		http.Error(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`, http.StatusBadRequest)
		return
	}
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c struct {
		Aud   string `json:"aud"`
		Scope string `json:"scope"`
	}
	if json.Unmarshal(claims, &c) != nil || c.Aud != s.URL+"/token" || !strings.Contains(c.Scope, "rcsbusinessmessaging") {
		http.Error(w, `{"error":"invalid_scope"}`, http.StatusBadRequest)
		return
	}
	b := make([]byte, 16)
	rand.Read(b)
	tok := "ya29.fake-" + base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	s.tokens[tok] = true
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3599})
}

// Post sends one event to a webhook at url, signed with clientToken, and
// returns the answer's status.
func Post(url, clientToken string, event map[string]any) (int, error) {
	data, _ := json.Marshal(event)
	m := hmac.New(sha512.New, []byte(clientToken))
	m.Write(data)
	body, _ := json.Marshal(map[string]any{"message": map[string]any{"data": base64.StdEncoding.EncodeToString(data),
		"messageId": fmt.Sprint(time.Now().UnixNano()), "publishTime": time.Now().UTC().Format(time.RFC3339Nano)},
		"subscription": "projects/rbm-test/subscriptions/rbm-webhook"})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Goog-Signature", base64.StdEncoding.EncodeToString(m.Sum(nil)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// UserEvent is the event a user's device reports about an agent message.
func (s *Server) UserEvent(kind, from, messageID string) map[string]any {
	return map[string]any{"senderPhoneNumber": from, "eventType": kind, "eventId": fmt.Sprint("ev-", time.Now().UnixNano()),
		"messageId": messageID, "sendTime": time.Now().UTC().Format(time.RFC3339Nano), "agentId": s.AgentID}
}

// UserMessage is a text a user sends to the agent.
func (s *Server) UserMessage(from, text string) map[string]any {
	return map[string]any{"senderPhoneNumber": from, "messageId": fmt.Sprint("um-", time.Now().UnixNano()),
		"sendTime": time.Now().UTC().Format(time.RFC3339Nano), "text": text, "agentId": s.AgentID}
}

// Handshake makes the webhook set-up request to url and reports whether
// it answered the secret.
func Handshake(url, clientToken string) (bool, error) {
	body, _ := json.Marshal(map[string]string{"clientToken": clientToken, "secret": "1234567890"})
	res, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode == 200 && string(b) == "1234567890", nil
}
