package rbm

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	sb "github.com/switchboard/switchboard"
)

// ErrDetection is the DETECTION_UNAVAILABLE of a capability check that got
// no usable answer (429, 5xx, a timeout, a failed request).
var ErrDetection = sb.Errorf(sb.CodeDetectionUnavailable, "Channel detection is temporarily unavailable: the RCS agent did not answer the capability check. Send with channel \"sms\", or retry.")

// Detect returns the channel number can receive from the agent: chat when
// Google's capability check answers 200; sms on 404 (not reachable by RCS)
// and on 403 (the agent is not launched on the user's carrier, or the user
// is not a tester of an unlaunched agent: a configuration warning is
// logged); ErrDetection on 429, 5xx, a timeout (DetectTimeout) or a failed
// request. Answers are cached per number (chat for ChatFor, sms for
// SMSFor), so a campaign does not ask once per message.
func (l *Link) Detect(ctx context.Context, number string) (string, error) {
	if ch, ok := l.Cached(number); ok {
		return ch, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.Opt.DetectTimeout)
	defer cancel()
	// GET /v1/{name=phones/*}/capabilities (rbm.proto, GetCapabilities):
	// requestId is a UUID the agent picks; agentId names the agent.
	q := url.Values{"requestId": {MessageUUID(sb.NewID())}, "agentId": {l.cfg.AgentID}}
	status, body, err := l.do(ctx, http.MethodGet, phonePath(number, "/capabilities"), q, nil)
	switch {
	case err != nil:
		l.Detected("unavailable")
		l.Log.Warn("RBM capability check failed", "err", err)
		return "", ErrDetection
	case status == http.StatusOK:
		l.Caps.Keep(number, sb.ChannelChat)
		l.Detected("chat")
		return sb.ChannelChat, nil
	case status == http.StatusNotFound:
		l.Caps.Keep(number, sb.ChannelSMS)
		l.Detected("sms")
		return sb.ChannelSMS, nil
	case status == http.StatusForbidden:
		l.Caps.Keep(number, sb.ChannelSMS)
		l.Detected("forbidden")
		l.Log.Warn("RBM capability check refused (403): the agent is not launched on this user's carrier, or the user is not a tester of the unlaunched agent; sending by SMS",
			"agent_id", l.cfg.AgentID, "answer", errorText(status, body))
		return sb.ChannelSMS, nil
	}
	l.Detected("unavailable")
	l.Log.Warn("RBM capability check unanswered", "answer", errorText(status, body))
	return "", ErrDetection
}

// MaxBatch is the most numbers one users:batchGet may name.
const MaxBatch = 10000

// DetectMany answers Detect for many numbers at once (a campaign's
// audience), with POST /v1/users:batchGet (rbm.proto, BatchGetUsers): the
// numbers it lists as reachable are chat, the others sms. Cached answers
// are not asked again. An unanswered request is ErrDetection.
func (l *Link) DetectMany(ctx context.Context, numbers []string) (map[string]string, error) {
	out := make(map[string]string, len(numbers))
	var ask []string
	for _, n := range numbers {
		if ch, ok := l.Caps.Get(n); ok {
			out[n] = ch
		} else if _, dup := out[n]; !dup {
			ask = append(ask, n)
			out[n] = ""
		}
	}
	for len(ask) > 0 {
		part := ask[:min(len(ask), MaxBatch)]
		ask = ask[len(part):]
		var res struct {
			ReachableUsers []string `json:"reachableUsers"`
		}
		status, body, err := l.do(ctx, http.MethodPost, "/v1/users:batchGet", url.Values{"agentId": {l.cfg.AgentID}}, map[string]any{"users": part})
		if err == nil && status != http.StatusOK {
			err = errors.New(errorText(status, body))
		}
		if err == nil {
			err = jsonUnmarshal(body, &res)
		}
		if err != nil {
			l.Detected("unavailable")
			l.Log.Warn("RBM batch capability check failed", "numbers", len(part), "err", err)
			return nil, ErrDetection
		}
		reach := make(map[string]bool, len(res.ReachableUsers))
		for _, u := range res.ReachableUsers {
			reach[u] = true
		}
		for _, n := range part {
			ch := sb.ChannelSMS
			if reach[n] {
				ch = sb.ChannelChat
			}
			out[n] = ch
			l.Caps.Keep(n, ch)
		}
		l.Opt.Metrics.DetectN(l.Engine, l.cfg.Name, "batch", len(part))
	}
	return out, nil
}
