package rbm

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	sb "github.com/switchboard/switchboard"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// Send implements carrier.Link: it takes m (a chat message of one of the
// link's phones) and sends it in the background, recording Google's answer
// in the store. A message the link holds already is not taken twice; while
// the agent is unreachable, messages are put off (sb.Deferred) and wait in
// the queue.
func (l *Link) Send(ctx context.Context, m *sb.Message) error { return l.Take(m, l.send) }

// send makes CreateAgentMessage requests for m until Google gives a final
// answer: POST /v1/{parent=phones/*}/agentMessages (rbm.proto) with
// messageId (the message's UUID: Google ignores a second message with an
// id it has seen) and agentId, the body an AgentMessage with
// contentMessage.text. 200 (and 409, an id Google has already taken) makes
// the message sent; 404 (the number is not reachable by RCS) and 403 (the
// agent is not launched there) fail it; 429, 5xx and failed requests are
// tried again with a back-off.
func (l *Link) send(ctx context.Context, m *sb.Message) {
	id := MessageUUID(m.ID)
	q := url.Values{"messageId": {id}, "agentId": {l.cfg.AgentID}}
	body := map[string]any{"contentMessage": map[string]any{"text": m.Body}}
	for try := 0; ; try++ {
		if ctx.Err() != nil {
			return // unrecorded: handed over again when its claim runs out
		}
		status, resp, err := l.do(ctx, http.MethodPost, phonePath(m.To, "/agentMessages"), q, body)
		now := l.Opt.Now().UTC()
		switch {
		case err == nil && (status == http.StatusOK || status == http.StatusConflict):
			l.Health.OK()
			l.SendResult("accepted")
			l.Record(ctx, m.ID, []sb.CarrierEvent{{Kind: sb.CarrierAccepted, MessageID: m.ID, Parts: 1, ExternalID: id, At: now}})
			return
		case err == nil && (status == http.StatusNotFound || status == http.StatusForbidden):
			l.Health.OK()
			reason := "the number is not reachable by RCS (" + errorText(status, resp) + ")"
			if status == http.StatusForbidden {
				reason = "the RBM agent may not message this number: not launched on its carrier, or not a tester (" + errorText(status, resp) + ")"
				l.Log.Warn("RBM refused a message (403): check the agent's launch and testers", "agent_id", l.cfg.AgentID, "message_id", m.ID)
			}
			l.Caps.Forget(m.To)
			// 404: the number lost RCS since detection, and an auto
			// message goes by SMS instead.
			l.Refused(ctx, m.ID, reason, status == http.StatusNotFound, now)
			return
		case err == nil && status/100 == 4 && status != http.StatusTooManyRequests && status != http.StatusUnauthorized:
			l.Health.OK()
			l.Refused(ctx, m.ID, "RBM refused the message ("+errorText(status, resp)+")", false, now)
			return
		}
		why := ""
		if err != nil {
			why = err.Error()
		} else {
			why = errorText(status, resp)
		}
		if status != http.StatusTooManyRequests {
			l.Health.Failed(why)
		}
		if !l.Retry(ctx, try, m.ID, why) {
			return
		}
	}
}
