package rbm

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// Send implements carrier.Link: it takes m (a chat message of one of the
// link's phones) and sends it in the background, recording Google's answer
// in the store. A message the link holds already is not taken twice; while
// the agent is unreachable, messages are put off (sb.Deferred) and wait in
// the queue.
func (l *Link) Send(ctx context.Context, m *sb.Message) error {
	now := l.opt.Now()
	l.mu.Lock()
	if l.held[m.ID] {
		l.mu.Unlock()
		return nil
	}
	if !l.up {
		l.mu.Unlock()
		return &sb.Deferred{Until: now.Add(5 * time.Second), Reason: "the RBM agent " + l.cfg.Name + " is unreachable"}
	}
	l.held[m.ID] = true
	runCtx := l.ctx
	l.wg.Add(1)
	l.mu.Unlock()
	c := *m
	go func() {
		defer l.wg.Done()
		select {
		case l.sem <- struct{}{}:
		case <-runCtx.Done():
			l.release(c.ID)
			return
		}
		defer func() { <-l.sem }()
		l.send(runCtx, &c)
	}()
	return nil
}

func (l *Link) release(id string) {
	l.mu.Lock()
	delete(l.held, id)
	l.mu.Unlock()
}

// send makes CreateAgentMessage requests for m until Google gives a final
// answer: POST /v1/{parent=phones/*}/agentMessages (rbm.proto) with
// messageId (the message's UUID: Google ignores a second message with an
// id it has seen) and agentId, the body an AgentMessage with
// contentMessage.text. 200 (and 409, an id Google has already taken) makes
// the message sent; 404 (the number is not reachable by RCS) and 403 (the
// agent is not launched there) fail it; 429, 5xx and failed requests are
// tried again with a back-off.
func (l *Link) send(ctx context.Context, m *sb.Message) {
	defer l.release(m.ID)
	id := MessageUUID(m.ID)
	q := url.Values{"messageId": {id}, "agentId": {l.cfg.AgentID}}
	body := map[string]any{"contentMessage": map[string]any{"text": m.Body}}
	for try := 0; ; try++ {
		if ctx.Err() != nil {
			return // unrecorded: handed over again when its claim runs out
		}
		status, resp, err := l.do(ctx, http.MethodPost, phonePath(m.To, "/agentMessages"), q, body)
		now := l.opt.Now().UTC()
		switch {
		case err == nil && (status == http.StatusOK || status == http.StatusConflict):
			l.requestOK()
			l.opt.Metrics.Send(carrier.TypeRBM, l.cfg.Name, "accepted")
			l.record(ctx, m.ID, []sb.CarrierEvent{{Kind: sb.CarrierAccepted, MessageID: m.ID, Parts: 1, ExternalID: id, At: now}})
			return
		case err == nil && (status == http.StatusNotFound || status == http.StatusForbidden):
			l.requestOK()
			reason := "the number is not reachable by RCS (" + errorText(status, resp) + ")"
			if status == http.StatusForbidden {
				reason = "the RBM agent may not message this number: not launched on its carrier, or not a tester (" + errorText(status, resp) + ")"
				l.log.Warn("RBM refused a message (403): check the agent's launch and testers", "agent_id", l.cfg.AgentID, "message_id", m.ID)
			}
			l.Forget(m.To)
			if status == http.StatusNotFound {
				// The number lost RCS since detection: an auto message
				// goes by SMS instead.
				if moved, err := l.store.ChatFallback(context.WithoutCancel(ctx), m.ID, reason, now); err == nil && moved {
					l.opt.Metrics.Send(carrier.TypeRBM, l.cfg.Name, "fell_back")
					return
				}
			}
			l.opt.Metrics.Send(carrier.TypeRBM, l.cfg.Name, "refused")
			l.record(ctx, m.ID, []sb.CarrierEvent{{Kind: sb.CarrierRefused, MessageID: m.ID, Parts: 1, Reason: reason, At: now}})
			return
		case err == nil && status/100 == 4 && status != http.StatusTooManyRequests && status != http.StatusUnauthorized:
			l.requestOK()
			l.opt.Metrics.Send(carrier.TypeRBM, l.cfg.Name, "refused")
			l.record(ctx, m.ID, []sb.CarrierEvent{{Kind: sb.CarrierRefused, MessageID: m.ID, Parts: 1,
				Reason: "RBM refused the message (" + errorText(status, resp) + ")", At: now}})
			return
		}
		why := ""
		if err != nil {
			why = err.Error()
		} else {
			why = errorText(status, resp)
		}
		if status != http.StatusTooManyRequests {
			l.requestFailed(why)
		}
		l.opt.Metrics.Send(carrier.TypeRBM, l.cfg.Name, "retried")
		wait := min(l.opt.BackoffMin<<min(try, 6), l.opt.BackoffMax)
		wait = wait/2 + rand.N(wait/2+1)
		l.log.Warn("RBM send failed: retrying", "message_id", m.ID, "err", why, "retry_in", wait.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// record writes events, retrying until they are on disk.
func (l *Link) record(ctx context.Context, messageID string, evs []sb.CarrierEvent) {
	for attempt := 0; ; attempt++ {
		_, err := l.store.RecordCarrier(context.WithoutCancel(ctx), l.cfg.Name, evs)
		if err == nil {
			return
		}
		if attempt >= 20 {
			l.log.Error("recording an RBM answer failed", "message_id", messageID, "err", err)
			return
		}
		time.Sleep(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second))
	}
}
