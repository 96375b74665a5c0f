package main

// End-to-end tests of /v1/phones (docs/phones.md): the tenant's sending
// phones, adding Android phones with their pairing codes, limits, deletion.
// The device protocol is in devices_test.go.

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/android/agent"
)

// phoneCreate adds an android phone with the live key and returns data.
func phoneCreate(t testing.TB, s *server, key string, body map[string]any) map[string]any {
	t.Helper()
	r := s.do(t, "POST", "/v1/phones", key, body)
	if r.Status != http.StatusCreated {
		t.Fatalf("create phone %v: %d %s", body, r.Status, r.Raw)
	}
	return r.Data()
}

// phoneGet returns GET /v1/phones/{id}, asserting 200.
func phoneGet(t testing.TB, s *server, key, id string) map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/phones/"+id, key, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("get phone %s: %d %s", id, r.Status, r.Raw)
	}
	return r.Data()
}

var pairingCode = regexp.MustCompile(`^[0-9]{8}$`)

func TestPhonesAPI(t *testing.T) {
	t.Parallel()
	runShared(t, nil, []sharedCase{
		{"create, read and list", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			number := msgFreshNumber("+1415XXXXXXX")
			before := time.Now()
			d := phoneCreate(t, s, tn.Live, map[string]any{"number": number})
			pairing := d["pairing"].(map[string]any)
			expires, _ := time.Parse(time.RFC3339, pairing["expires_at"].(string))
			if d["number"] != number || d["kind"] != "android" || d["status"] != "offline" || d["daily_limit"] != 1000.0 ||
				d["rate_limit"] != nil || d["sent_today"] != 0.0 || d["last_seen_at"] != nil || d["device"] != nil ||
				len(d["channels"].([]any)) != 1 || d["channels"].([]any)[0] != "sms" {
				t.Fatalf("created phone: %v", d)
			}
			if !pairingCode.MatchString(pairing["code"].(string)) {
				t.Errorf("pairing code %q, want 8 digits", pairing["code"])
			}
			if want := before.Add(15 * time.Minute); expires.Before(want.Add(-2*time.Second)) || expires.After(want.Add(time.Minute)) {
				t.Errorf("pairing expires at %v, want 15 minutes after %v", expires, before)
			}
			id := d["id"].(string)

			got := phoneGet(t, s, tn.Live, id)
			if got["id"] != id || got["kind"] != "android" || got["pairing"] != nil {
				t.Errorf("get: %v", got)
			}
			// A test key reads phones too.
			if got := phoneGet(t, s, tn.Test, id); got["id"] != id {
				t.Errorf("get with the test key: %v", got)
			}
			// Oldest first: the simulated phone of tenant create, then this one.
			list := s.do(t, "GET", "/v1/phones", tn.Live, nil).List()
			if len(list) != 2 || list[0]["id"] != tn.Phone.ID || list[0]["kind"] != "simulated" || list[0]["status"] != "online" ||
				list[1]["id"] != id {
				t.Errorf("list: %v", list)
			}
			// Another tenant's phone does not exist for this tenant.
			other := msgTenant(t, db)
			msgWantErr(t, s.do(t, "GET", "/v1/phones/"+id, other.Live, nil), 404, "NOT_FOUND", "")
			msgWantErr(t, s.do(t, "PATCH", "/v1/phones/"+id, other.Live, map[string]any{"daily_limit": 1}), 404, "NOT_FOUND", "")
			msgWantErr(t, s.do(t, "DELETE", "/v1/phones/"+id, other.Live, nil), 404, "NOT_FOUND", "")
			msgWantErr(t, s.do(t, "POST", "/v1/phones/"+id+"/pairing", other.Live, nil), 404, "NOT_FOUND", "")
			if got := phoneGet(t, s, tn.Live, id); got["daily_limit"] != 1000.0 {
				t.Errorf("another tenant changed the phone: %v", got)
			}
		}},
		{"validation", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			for _, c := range []struct {
				body        map[string]any
				code, field string
			}{
				{map[string]any{}, "VALIDATION_ERROR", "number"},
				{map[string]any{"number": ""}, "VALIDATION_ERROR", "number"},
				{map[string]any{"number": "+1415555"}, "INVALID_PHONE_NUMBER", "number"},
				{map[string]any{"number": "+14155550100", "daily_limit": 0}, "VALIDATION_ERROR", "daily_limit"},
				{map[string]any{"number": "+14155550100", "daily_limit": 2.5}, "VALIDATION_ERROR", "daily_limit"},
				{map[string]any{"number": "+14155550100", "rate_limit": 0}, "VALIDATION_ERROR", "rate_limit"},
				{map[string]any{"number": "+14155550100", "rate_limit": 6001}, "VALIDATION_ERROR", "rate_limit"},
				{map[string]any{"number": "+14155550100", "sim_number": 4}, "VALIDATION_ERROR", "sim_number"},
				{map[string]any{"number": "+14155550100", "sim_number": "1"}, "VALIDATION_ERROR", "sim_number"},
				{map[string]any{"number": "+14155550100", "kind": "simulated"}, "VALIDATION_ERROR", "kind"},
			} {
				msgWantErr(t, s.do(t, "POST", "/v1/phones", tn.Live, c.body), 400, c.code, c.field)
			}
			// A test key changes no phone.
			msgWantErr(t, s.do(t, "POST", "/v1/phones", tn.Test, map[string]any{"number": msgFreshNumber("+1415XXXXXXX")}), 403, "FORBIDDEN", "")
			// Whole numbers written with a fraction are whole numbers.
			d := phoneCreate(t, s, tn.Live, map[string]any{"number": msgFreshNumber("+1415XXXXXXX"), "daily_limit": 5.0, "rate_limit": 20, "sim_number": 2})
			if d["daily_limit"] != 5.0 || d["rate_limit"] != 20.0 {
				t.Errorf("limits: %v", d)
			}
			// null: no daily limit.
			if d := phoneCreate(t, s, tn.Live, map[string]any{"number": msgFreshNumber("+1415XXXXXXX"), "daily_limit": nil}); d["daily_limit"] != nil {
				t.Errorf("daily_limit null: %v", d)
			}
		}},
		{"fleet fields: warm-up, quarantine policy, status", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			d := phoneCreate(t, s, tn.Live, map[string]any{"number": msgFreshNumber("+1415XXXXXXX"), "daily_limit": 1000,
				"warmup": map[string]any{"start": 50, "days": 14}, "quarantine_policy": map[string]any{"failed": 3, "of": 6}})
			w, _ := d["warmup"].(map[string]any)
			qp, _ := d["quarantine_policy"].(map[string]any)
			if d["effective_daily_limit"] != 50.0 || w == nil || w["start"] != 50.0 || w["days"] != 14.0 || w["day"] != 1.0 ||
				qp["failed"] != 3.0 || qp["of"] != 6.0 || d["health"] != nil || d["quarantine"] != nil || len(d["trouble"].([]any)) != 0 {
				t.Fatalf("created with a warm-up: %v", d)
			}
			id := d["id"].(string)
			for _, c := range []struct {
				body  map[string]any
				field string
			}{
				{map[string]any{"warmup": map[string]any{"start": 50}}, "warmup"},
				{map[string]any{"warmup": map[string]any{"start": 2000, "days": 14}}, "warmup.start"},
				{map[string]any{"warmup": map[string]any{"start": 50, "days": 1}}, "warmup.days"},
				{map[string]any{"warmup": map[string]any{"start": 50, "days": 14, "x": 1}}, "warmup"},
				{map[string]any{"daily_limit": nil, "warmup": map[string]any{"start": 5, "days": 3}}, "warmup"},
				{map[string]any{"quarantine_policy": map[string]any{"failed": 7, "of": 6}}, "quarantine_policy.failed"},
				{map[string]any{"status": "offline"}, "status"},
				{map[string]any{"status": "quarantined"}, "status"},
			} {
				msgWantErr(t, s.do(t, "PATCH", "/v1/phones/"+id, tn.Live, c.body), 400, "VALIDATION_ERROR", c.field)
			}
			r := s.do(t, "PATCH", "/v1/phones/"+id, tn.Live, map[string]any{"warmup": nil, "quarantine_policy": nil, "status": "online"})
			if d := r.Data(); r.Status != 200 || d["warmup"] != nil || d["effective_daily_limit"] != 1000.0 || d["quarantine_policy"].(map[string]any)["failed"] != 5.0 {
				t.Fatalf("PATCH ending the warm-up: %d %s", r.Status, r.Raw)
			}
			r = s.do(t, "PATCH", "/v1/phones/"+id, tn.Live, map[string]any{"daily_limit": 200, "warmup": map[string]any{"start": 20, "days": 10}})
			if d := r.Data(); r.Status != 200 || d["effective_daily_limit"] != 20.0 {
				t.Fatalf("PATCH starting a warm-up: %d %s", r.Status, r.Raw)
			}
		}},
		{"duplicates", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			number := msgFreshNumber("+1415XXXXXXX")
			id := phoneCreate(t, s, tn.Live, map[string]any{"number": number})["id"]
			r := s.do(t, "POST", "/v1/phones", tn.Live, map[string]any{"number": number})
			msgWantErr(t, r, 409, "DUPLICATE_PHONE", "")
			if det, _ := r.Body["details"].(map[string]any); det["existing_id"] != id {
				t.Errorf("duplicate: details %v, want existing_id %v", r.Body["details"], id)
			}
			// Another tenant is not kept from the number, nor told that
			// someone has it: a paired device is what proves a number.
			other := msgTenant(t, db)
			theirs := phoneCreate(t, s, other.Live, map[string]any{"number": number})
			if theirs["id"] == id {
				t.Fatalf("another tenant's phone: %v", theirs)
			}
			// The operator can give the number to a third tenant's
			// simulated phone; a carrier or simulated number stays unique
			// among all tenants, so a fourth cannot have it.
			third, fourth := msgTenant(t, db), msgTenant(t, db)
			cli(t, db, "phone", "add", "--tenant", third.ID, "--number", number)
			if _, err := cliErr(db, "phone", "add", "--tenant", fourth.ID, "--number", number); err == nil {
				t.Error("a simulated phone with another tenant's simulated number was added")
			}
			// Each device pairs with its own tenant's phone.
			for key, want := range map[string]any{tn.Live: id, other.Live: theirs["id"]} {
				r := s.do(t, "POST", "/v1/phones/"+want.(string)+"/pairing", key, nil)
				if r.Status != 200 {
					t.Fatalf("a new code: %d %s", r.Status, r.Raw)
				}
				if a, _ := devAgent(t, s, r.Data()["code"].(string), agent.Options{}, false); a.Login != want {
					t.Errorf("the device paired with %s, want %s", a.Login, want)
				}
			}
		}},
		{"a plan caps the phones", func(t *testing.T, s *server, db string) {
			tn := newTenant(t, db, "--plan", "starter") // 10 phones; tenant create made one
			for i := range 9 {
				phoneCreate(t, s, tn.Live, map[string]any{"number": fmt.Sprintf("+1415555%04d", 7000+i)})
			}
			r := s.do(t, "POST", "/v1/phones", tn.Live, map[string]any{"number": "+14155557999"})
			msgWantErr(t, r, 400, "VALIDATION_ERROR", "number")
			if msg, _ := r.Body["error"].(string); !strings.Contains(msg, "10") {
				t.Errorf("the refusal does not name the cap: %q", msg)
			}
			if r := s.do(t, "DELETE", "/v1/phones/"+tn.Phone.ID, tn.Live, nil); r.Status != 200 {
				t.Fatalf("delete: %d", r.Status)
			}
			phoneCreate(t, s, tn.Live, map[string]any{"number": "+14155557999"})
		}},
		{"limits and pairing codes", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			d := phoneCreate(t, s, tn.Live, map[string]any{"number": msgFreshNumber("+1415XXXXXXX")})
			id, first := d["id"].(string), d["pairing"].(map[string]any)["code"].(string)
			patch := func(body map[string]any) map[string]any {
				r := s.do(t, "PATCH", "/v1/phones/"+id, tn.Live, body)
				if r.Status != 200 {
					t.Fatalf("patch %v: %d %s", body, r.Status, r.Raw)
				}
				return r.Data()
			}
			if got := patch(map[string]any{"daily_limit": 5, "rate_limit": 30}); got["daily_limit"] != 5.0 || got["rate_limit"] != 30.0 {
				t.Errorf("patch: %v", got)
			}
			if got := patch(map[string]any{"daily_limit": nil}); got["daily_limit"] != nil || got["rate_limit"] != 30.0 {
				t.Errorf("daily_limit null: %v", got)
			}
			if got := patch(map[string]any{}); got["daily_limit"] != nil || got["rate_limit"] != 30.0 {
				t.Errorf("empty patch: %v", got)
			}
			msgWantErr(t, s.do(t, "PATCH", "/v1/phones/"+id, tn.Live, map[string]any{"daily_limit": -1}), 400, "VALIDATION_ERROR", "daily_limit")
			msgWantErr(t, s.do(t, "PATCH", "/v1/phones/"+id, tn.Live, map[string]any{"number": "+14155550100"}), 400, "VALIDATION_ERROR", "number")
			msgWantErr(t, s.do(t, "PATCH", "/v1/phones/"+id, tn.Test, map[string]any{"daily_limit": 1}), 403, "FORBIDDEN", "")

			// A new code replaces the first: the first pairs no device.
			r := s.do(t, "POST", "/v1/phones/"+id+"/pairing", tn.Live, nil)
			if r.Status != 200 || !pairingCode.MatchString(r.Data()["code"].(string)) || r.Data()["code"] == first {
				t.Fatalf("new pairing code: %d %s", r.Status, r.Raw)
			}
			second := r.Data()["code"].(string)
			if status := devRegisterStatus(t, s, first); status != http.StatusUnauthorized {
				t.Errorf("pairing with the replaced code: %d, want 401", status)
			}
			if status := devRegisterStatus(t, s, second); status != http.StatusCreated {
				t.Errorf("pairing with the new code: %d, want 201", status)
			}
			msgWantErr(t, s.do(t, "POST", "/v1/phones/"+id+"/pairing", tn.Test, nil), 403, "FORBIDDEN", "")
			// Simulated phones have no device to pair.
			msgWantErr(t, s.do(t, "POST", "/v1/phones/"+tn.Phone.ID+"/pairing", tn.Live, nil), 400, "VALIDATION_ERROR", "id")
		}},
		{"delete", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			id := phoneCreate(t, s, tn.Live, map[string]any{"number": msgFreshNumber("+1415XXXXXXX")})["id"].(string)
			msgWantErr(t, s.do(t, "DELETE", "/v1/phones/"+id, tn.Test, nil), 403, "FORBIDDEN", "")
			r := s.do(t, "DELETE", "/v1/phones/"+id, tn.Live, nil)
			if r.Status != 200 || r.Data()["id"] != id || r.Data()["deleted"] != true {
				t.Fatalf("delete: %d %s", r.Status, r.Raw)
			}
			msgWantErr(t, s.do(t, "GET", "/v1/phones/"+id, tn.Live, nil), 404, "NOT_FOUND", "")
			msgWantErr(t, s.do(t, "DELETE", "/v1/phones/"+id, tn.Live, nil), 404, "NOT_FOUND", "")
			// The simulated phone of tenant create can go like any other; the
			// tenant then has no phone to send live messages from, and test
			// mode needs none: the simulator's sandbox number sends them.
			if r := s.do(t, "DELETE", "/v1/phones/"+tn.Phone.ID, tn.Live, nil); r.Status != 200 {
				t.Fatalf("delete the simulated phone: %d %s", r.Status, r.Raw)
			}
			r = s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "hi"})
			msgWantErr(t, r, 503, "NO_PHONE_AVAILABLE", "")
			if !strings.Contains(string(r.Raw), "this tenant has no sending phone") {
				t.Errorf("NO_PHONE_AVAILABLE with no phones: %s", r.Raw)
			}
			r = s.do(t, "POST", "/v1/messages", tn.Test, map[string]any{"to": msgAwake(t), "body": "hi"})
			if r.Status != 202 || r.Data()["from"] != sb.SandboxNumber {
				t.Fatalf("test send with no phone: %d %s", r.Status, r.Raw)
			}
			m := s.do(t, "GET", "/v1/messages/"+r.Data()["message_id"].(string), tn.Test, nil).Data()
			if m["engine"] != "simulator" {
				t.Errorf("test message's engine: %v", m["engine"])
			}
		}},
	})
}

// TestPhoneOperatorCommands: `phone add` and `phone list` print the fields
// of the API.
func TestPhoneOperatorCommands(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		tn := msgTenant(t, db)
		p := msgAddPhone(t, db, tn.ID, "--daily-limit", "7")
		out := cli(t, db, "phone", "list", "--tenant", tn.ID)
		for _, field := range []string{`"kind":"simulated"`, `"daily_limit":7`, `"sent_today":0`, `"last_seen_at":null`, `"device":null`, `"rate_limit":null`, `"id":"` + p.ID + `"`} {
			if !regexp.MustCompile(regexp.QuoteMeta(field)).MatchString(out) {
				t.Errorf("phone list lacks %s: %s", field, out)
			}
		}
	})
}
