package rbm

import (
	"context"
	"net/http"
	"net/url"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/chat"
)

// Revoke asks Google to revoke the agent message of messageID to number, a
// message the agent accepted but has not reported delivered within its
// ttl, before it goes again by SMS: DELETE
// /v1/phones/{E.164}/agentMessages/{messageId}?agentId= (the REST
// reference's phones.agentMessages.delete; the "Revoke messages" guide
// makes it the step before "an alternate channel like SMS"). 200: the
// message is deleted from the user's queue and never delivered (Revoked).
// 404: the revoke failed because the message was delivered; it is recorded
// as delivered (RevokeDelivered). Anything else (5xx, 429, 401, a timeout)
// is RevokeFailed: the message may still arrive by RCS, so it must not go
// by SMS now. Each result is counted and logged.
func (l *Link) Revoke(ctx context.Context, number, messageID string) chat.RevokeResult {
	id := MessageUUID(messageID)
	status, resp, err := l.do(ctx, http.MethodDelete, phonePath(number, "/agentMessages/"+url.PathEscape(id)), url.Values{"agentId": {l.cfg.AgentID}}, nil)
	r := chat.RevokeFailed
	switch {
	case err != nil:
		l.Health.Failed(err.Error())
		l.Log.Warn("RBM revoke failed: tried again later, no SMS meanwhile", "message_id", messageID, "err", err.Error())
	case status == http.StatusOK:
		l.Health.OK()
		r = chat.Revoked
		l.Log.Info("RBM message revoked: it goes by SMS", "message_id", messageID)
	case status == http.StatusNotFound:
		l.Health.OK()
		now := l.Opt.Now().UTC()
		if _, err := l.Store.RecordCarrier(context.WithoutCancel(ctx), l.cfg.Name, []sb.CarrierEvent{{Kind: sb.CarrierReceipt, ExternalID: id,
			State: sb.ReceiptDelivered, Reason: "DELIVERED (the revoke found it delivered)", At: now, From: number}}); err != nil {
			l.Log.Error("recording an RBM message the revoke found delivered: tried again later", "message_id", messageID, "err", err)
			break
		}
		r = chat.RevokeDelivered
		l.Log.Info("RBM revoke: the message was delivered already; no SMS", "message_id", messageID)
	default:
		why := errorText(status, resp)
		if status/100 == 5 {
			l.Health.Failed(why)
		} else {
			l.Health.OK()
		}
		l.Log.Warn("RBM revoke failed: tried again later, no SMS meanwhile", "message_id", messageID, "err", why)
	}
	l.Revoked(r)
	return r
}
