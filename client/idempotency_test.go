package client_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/client"
)

// lossyProxy stands between the client and the real server. The first
// sends it sees go wrong on the way back, as answers do on real networks:
// "500" forwards the send and then answers 500 instead of the server's
// answer, "drop" forwards it and closes the connection without an answer,
// "503" answers 503 without forwarding. Everything else passes through.
type lossyProxy struct {
	srv   *httptest.Server
	mu    sync.Mutex
	plan  []string
	sends []proxiedSend
}

type proxiedSend struct {
	key, body string
	// answer is the real server's answer, when the send reached it.
	answer []byte
}

func newLossyProxy(t testing.TB, plan ...string) *lossyProxy {
	p := &lossyProxy{plan: plan}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *lossyProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	mode := ""
	isSend := r.Method == http.MethodPost && r.URL.Path == "/v1/messages"
	p.mu.Lock()
	if isSend {
		if n := len(p.sends); n < len(p.plan) {
			mode = p.plan[n]
		}
		p.sends = append(p.sends, proxiedSend{key: r.Header.Get("Idempotency-Key"), body: string(body)})
	}
	idx := len(p.sends) - 1
	p.mu.Unlock()

	if mode == "503" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"Channel detection is unavailable.","code":"DETECTION_UNAVAILABLE"}`)
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, testServer.URL+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if isSend {
		p.mu.Lock()
		p.sends[idx].answer = answer
		p.mu.Unlock()
	}
	switch mode {
	case "500":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":"Internal error.","code":"INTERNAL_ERROR"}`)
		return
	case "drop":
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

func (p *lossyProxy) sent() []proxiedSend {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sends)
}

// TestSendRetriedIdempotently: a send whose answer is lost after the server
// stored it is retried with the same Idempotency-Key and body, and the
// server stores one message: the retry's answer is the first one, replayed.
func TestSendRetriedIdempotently(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		plan     []string
		sleeps   []int
		replayed bool
	}{
		{"answer lost as a 500", []string{"500"}, []int{1}, true},
		{"answer lost twice", []string{"500", "500"}, []int{1, 2}, true},
		{"connection dropped after the server stored it", []string{"drop"}, []int{1}, true},
		{"503 before the server", []string{"503", "503"}, []int{2, 4}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			tn := newTenant(t)
			proxy := newLossyProxy(t, tc.plan...)
			clock := &fakeClock{}
			c, err := client.New(proxy.srv.URL, tn.Test, client.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			res := must(c.SendMessage(ctx, client.SendParams{To: "+15005550000", Body: "Your order has shipped"}))(t)
			if res.Replayed != tc.replayed || res.Status != client.StatusQueued {
				t.Fatalf("result %+v, want replayed %v", res, tc.replayed)
			}
			if got := clock.slept(); !slices.Equal(got, secs(tc.sleeps...)) {
				t.Fatalf("waits %v, want %v", got, secs(tc.sleeps...))
			}
			sends := proxy.sent()
			if len(sends) != len(tc.plan)+1 {
				t.Fatalf("%d attempts, want %d", len(sends), len(tc.plan)+1)
			}
			for _, s := range sends {
				if s.key != res.IdempotencyKey || s.body != sends[0].body {
					t.Fatalf("attempt with key %q body %s; the first had %q %s", s.key, s.body, res.IdempotencyKey, sends[0].body)
				}
			}
			// The answer the client got is the one the server gave the
			// first attempt that reached it.
			for _, s := range sends {
				if s.answer == nil {
					continue
				}
				var first struct {
					Data struct {
						MessageID string `json:"message_id"`
					}
				}
				if err := json.Unmarshal(s.answer, &first); err != nil || first.Data.MessageID != res.MessageID {
					t.Fatalf("first answer %s, the client got message %s", s.answer, res.MessageID)
				}
				break
			}
			// One message is stored, whatever happened on the way.
			direct := newClient(t, tn.Test)
			msgs := collect(t, direct.ListMessages(ctx, nil))
			if len(msgs) != 1 || msgs[0].ID != res.MessageID || msgs[0].Body != "Your order has shipped" {
				t.Fatalf("stored messages: %s", jsonString(msgs))
			}
		})
	}
}
