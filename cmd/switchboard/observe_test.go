package main

// The server says what it is doing: a structured log line per request at
// debug level, delivery failures, failed webhook attempts and campaigns at
// info, start-up warnings; and /metrics counts the work. Never a key or a
// secret in a log line.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// logLines returns the JSON log lines of s whose msg is msg.
func logLines(t testing.TB, s *server, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(s.logs.String(), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// awaitLog waits for a log line with msg whose attributes include want, and
// returns it.
func awaitLog(t testing.TB, s *server, msg string, want map[string]any) map[string]any {
	t.Helper()
	var found map[string]any
	eventually(t, 30*time.Second, fmt.Sprintf("a log line %q with %v", msg, want), func() bool {
		for _, l := range logLines(t, s, msg) {
			ok := true
			for k, v := range want {
				if fmt.Sprint(l[k]) != fmt.Sprint(v) {
					ok = false
				}
			}
			if ok {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

// scrape returns the metrics text of s.
func scrape(t testing.TB, s *server) string {
	t.Helper()
	res, err := httpClient.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", res.StatusCode, b)
	}
	return string(b)
}

// metric returns the value of the sample series (a name with its labels,
// as the text format writes them), or -1 when /metrics has none.
func metric(text, series string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// awaitMetric waits until series has the value want.
func awaitMetric(t testing.TB, s *server, series string, want float64) {
	t.Helper()
	var got float64
	eventually(t, 30*time.Second, fmt.Sprintf("%s to be %v", series, want), func() bool {
		got = metric(scrape(t, s), series)
		return got == want
	})
}

func TestObservability(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		// A tenant before the server starts: its simulated phone is worth a
		// start-up warning.
		first := newTenant(t, db, "--plan", "scale")
		s := startServer(t, db, "--log-level", "debug", hookAllowPrivate, "--plans", tempPlansFile(t, `{"scale": {"new_contacts_per_day": 1}}`))
		tn := newTenant(t, db, "--plan", "growth")

		// Start-up warnings.
		warnings := logLines(t, s, "live messages sent from simulated phones are delivered by the built-in simulator and reach no real phone: "+
			"give those tenants android phones (POST /v1/phones) and delete the simulated ones to send for real")
		if len(warnings) != 1 || warnings[0]["level"] != "WARN" || warnings[0]["simulated_phones"] != 1.0 || warnings[0]["tenants"] != 1.0 {
			t.Errorf("simulated phones warning: %v", warnings)
		}
		if w := logLines(t, s, "webhooks may reach loopback and private addresses (--allow-private-webhooks): "+
			"a development setting; never use it on a server that takes webhook urls from people you do not trust"); len(w) != 1 || w[0]["level"] != "WARN" {
			t.Errorf("--allow-private-webhooks warning: %v", w)
		}

		// One debug line per request: method, route pattern, status,
		// duration, request id, tenant and environment.
		r := s.do(t, "GET", "/v1/messages/01ARZ3NDEKTSV4RRFFQ69G5FAV", tn.Live, nil, "X-Request-Id", "trace-4711")
		l := awaitLog(t, s, "request", map[string]any{"request_id": "trace-4711"})
		want := map[string]any{"level": "DEBUG", "method": "GET", "route": "GET /v1/messages/{id}", "status": 404.0,
			"tenant_id": tn.ID, "environment": "live"}
		for k, v := range want {
			if l[k] != v {
				t.Errorf("request log line %v: %s is %v, want %v", l, k, l[k], v)
			}
		}
		if d, ok := l["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("request log line without a duration: %v", l)
		}
		if r.Status != 404 {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		s.do(t, "GET", "/v1/api-keys", "", nil, "X-Request-Id", "anon-1")
		if l := awaitLog(t, s, "request", map[string]any{"request_id": "anon-1"}); l["status"] != 401.0 || l["tenant_id"] != nil {
			t.Errorf("unauthenticated request log line: %v", l)
		}
		s.do(t, "GET", "/v1/nowhere", "", nil, "X-Request-Id", "lost-1")
		if l := awaitLog(t, s, "request", map[string]any{"request_id": "lost-1"}); l["route"] != "unmatched" || l["status"] != 404.0 {
			t.Errorf("unknown path log line: %v", l)
		}

		// A delivery failure, at info.
		failed := msgSend(t, s, tn.Live, map[string]any{"to": "+15005550001", "body": "the secret body text"})["message_id"].(string)
		l = awaitLog(t, s, "message delivery failed", map[string]any{"message_id": failed})
		if l["level"] != "INFO" || l["tenant_id"] != tn.ID || l["environment"] != "live" || l["error_code"] != "DELIVERY_FAILED" ||
			l["failure_reason"] != "simulated carrier rejection" || l["phone_id"] != tn.Phone.ID {
			t.Errorf("delivery failure log line: %v", l)
		}
		msgSend(t, s, tn.Live, map[string]any{"to": "+15005550000", "body": "delivered"})
		msgSend(t, s, tn.Test, map[string]any{"to": "+15005550000", "body": "delivered too"})

		// A failed webhook attempt, at info: which webhook and delivery,
		// the attempt, why, and when the next one is.
		rc := newHookReceiver(t, hookAnswer(http.StatusInternalServerError))
		hookURL := rc.URL + "/hooks?token=do-not-log-me"
		hook := s.do(t, "POST", "/v1/webhooks", tn.Test, map[string]any{"url": hookURL, "events": []string{"message.received"}, "secret": hookSecret})
		if hook.Status != 201 {
			t.Fatalf("webhook: %d %s", hook.Status, hook.Raw)
		}
		hookID := hook.Data()["id"].(string)
		msgInbound(t, s, tn.Test, "+15005550002", "hello")
		l = awaitLog(t, s, "webhook attempt failed", map[string]any{"webhook_id": hookID, "attempt": 1})
		awaitMetric(t, s, `switchboard_webhook_deliveries_pending`, 1) // until its last retry, 14 s later
		if l["level"] != "INFO" || l["status_code"] != 500.0 || l["error"] != "endpoint answered 500" || l["retry_in"] != "2s" ||
			l["event"] != "message.received" || l["delivery_id"] == nil || l["host"] != "127.0.0.1" || l["tenant_id"] != tn.ID {
			t.Errorf("webhook attempt log line: %v", l)
		}

		// A campaign: launched, started, completed; another: canceled and
		// its deferred messages withdrawn.
		c := cmpCreate(t, s, tn.Test, map[string]any{"name": "Logged", "body": "hi", "to": []string{"+15005550000", "+15005550005"}})
		cid := c["id"].(string)
		cmpLaunch(t, s, tn.Test, cid)
		awaitLog(t, s, "campaign launched", map[string]any{"campaign_id": cid, "tenant_id": tn.ID, "recipients": 2, "environment": "test"})
		awaitLog(t, s, "campaign started", map[string]any{"campaign_id": cid, "audience": "to"})
		awaitLog(t, s, "campaign completed", map[string]any{"campaign_id": cid, "recipients": 2})
		// first's plan lets one new recipient a day: two of three wait.
		d := cmpCreate(t, s, first.Test, map[string]any{"name": "Deferred", "body": "hi", "to": []string{"+15005550000", "+15005550002", "+15005550005"}})
		did := d["id"].(string)
		cmpLaunch(t, s, first.Test, did)
		cmpAwait(t, s, first.Test, did, "two deferred", func(c map[string]any) bool { return cmpCounts(c)["deferred_limits"] == 2 })
		// /metrics: the deferred messages wait in the campaign lane, the
		// campaign runs with no recipient left to reach.
		awaitMetric(t, s, `switchboard_queue_depth{lane="campaign"}`, 2)
		awaitMetric(t, s, `switchboard_campaigns_running`, 1)
		awaitMetric(t, s, `switchboard_campaign_recipients_pending`, 0)
		if r := s.do(t, "POST", "/v1/campaigns/"+did+"/cancel", first.Test, nil); r.Status != 200 {
			t.Fatalf("cancel: %d %s", r.Status, r.Raw)
		}
		awaitLog(t, s, "campaign canceled", map[string]any{"campaign_id": did, "tenant_id": first.ID})
		awaitLog(t, s, "campaign canceled: its unsent messages are withdrawn", map[string]any{"campaign_id": did, "withdrawn": 2})
		awaitMetric(t, s, `switchboard_queue_depth{lane="campaign"}`, 0)
		awaitMetric(t, s, `switchboard_campaigns_running`, 0)

		// A campaign that cannot start (chat engine down) has all its
		// recipients pending.
		if r := s.do(t, "POST", "/v1/test/simulator", tn.Test, map[string]any{"chat_engine": "down"}); r.Status != 200 {
			t.Fatalf("simulator: %d %s", r.Status, r.Raw)
		}
		w := cmpCreate(t, s, tn.Test, map[string]any{"name": "Waits", "body": "hi", "channel": "chat", "to": []string{"+15005550006", "+15005550007", "+15005550008"}})
		cmpLaunch(t, s, tn.Test, w["id"].(string))
		awaitMetric(t, s, `switchboard_campaigns_running`, 1)
		awaitMetric(t, s, `switchboard_campaign_recipients_pending`, 3)

		// A key limited to one request a minute, used twice.
		limited := apiCreateKey(t, s, tn.Live, map[string]any{"name": "one a minute", "rate_limit": 1})["key"].(string)
		s.do(t, "GET", "/v1/api-keys", limited, nil)
		msgWantErr(t, s.do(t, "GET", "/v1/api-keys", limited, nil), 429, "RATE_LIMIT_EXCEEDED", "")
		// The new-contact limit of first's plan, used up today.
		msgWantErr(t, s.do(t, "POST", "/v1/messages", first.Test, map[string]any{"to": "+15005550009", "body": "x"}), 429, "NEW_CONTACT_LIMIT", "")

		// Five delivered through the simulator (two sends, the first
		// campaign's two, the second's one: its others were withdrawn), six
		// handed over (with the one that failed).
		awaitMetric(t, s, `switchboard_messages_total{engine="simulator",outcome="delivered"}`, 5)
		awaitMetric(t, s, `switchboard_message_delivery_seconds_count`, 5)
		awaitMetric(t, s, `switchboard_message_handoff_seconds_count`, 6)
		text := scrape(t, s)
		for series, want := range map[string]float64{
			`switchboard_campaign_recipients_reached_total`:                     5,
			`switchboard_messages_total{engine="simulator",outcome="failed"}`:   1,
			`switchboard_messages_total{engine="simulator",outcome="canceled"}`: 2,
			`switchboard_messages_total{engine="simulator",outcome="received"}`: 1,
			`switchboard_rate_limit_refusals_total{limit="key"}`:                1,
			`switchboard_rate_limit_refusals_total{limit="new_contacts"}`:       1,
			`switchboard_rate_limit_refusals_total{limit="tenant"}`:             0,
			`switchboard_phones{kind="simulated",status="online"}`:              2,
			`switchboard_phones{kind="android",status="online"}`:                0,
			`switchboard_queue_depth{lane="direct"}`:                            0,
			`switchboard_queue_depth{lane="device"}`:                            0,
			`switchboard_db_stale_reads_total`:                                  0, // no other node changed what this one kept
		} {
			if got := metric(text, series); got != want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
		}
		for series, atLeast := range map[string]float64{
			`switchboard_webhook_attempts_total{result="http_error"}`:            1,
			`switchboard_webhook_attempt_duration_seconds_count`:                 1,
			`switchboard_http_requests_total{route="GET /metrics",status="200"}`: 1,
			`switchboard_db_kept_reads_total`:                                    0,
		} {
			if got := metric(text, series); got < atLeast {
				t.Errorf("%s = %v, want at least %v", series, got, atLeast)
			}
		}
		// The group-commit writers' transactions and the writes in them:
		// at least the six messages handed over, each written once.
		if commits, writes := metric(text, `switchboard_db_commits_total`), metric(text, `switchboard_db_commit_writes_total`); commits < 1 || writes < 6 || writes < commits {
			t.Errorf("switchboard_db_commits_total = %v, switchboard_db_commit_writes_total = %v; want at least 1 and 6, and no more commits than writes", commits, writes)
		}

		// No key, secret, token or message text in any log line.
		logs := s.logs.String()
		for _, secret := range []string{tn.Live, tn.Test, first.Live, first.Test, limited, hookSecret, "do-not-log-me", "the secret body text", "/hooks"} {
			if strings.Contains(logs, secret) {
				t.Errorf("the log shows %q", secret)
			}
		}
	})
}
