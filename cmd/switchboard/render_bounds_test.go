package main

// The template rendering attack of the security review: a template that
// repeats one variable, sent with a huge value. Every such request must get
// a fast 400 naming the field, and the server's memory must not grow with
// the size of the data times the number of placeholders.

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestTemplateDataBounds(t *testing.T) {
	t.Parallel()
	runShared(t, nil, []sharedCase{
		{"sends", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			msgCreateTemplate(t, s, tn.Test, "rep", strings.Repeat("{{a}}", 320)) // 1,600 characters
			send := func(data map[string]any) *response {
				return s.do(t, "POST", "/v1/messages", tn.Test, map[string]any{"to": msgAwake(t), "template": "rep", "data": data})
			}
			// A value of 5 characters renders to exactly 1,600: accepted.
			msgSend(t, s, tn.Test, map[string]any{"to": msgAwake(t), "template": "rep", "data": map[string]any{"a": "éééé5"}})
			// 6 characters render to 1,920: refused, naming data.
			msgWantErr(t, send(map[string]any{"a": "123456"}), 400, "VALIDATION_ERROR", "data")
			// The longest value and one character more.
			msgWantErr(t, send(map[string]any{"a": strings.Repeat("€", 1600)}), 400, "VALIDATION_ERROR", "data")
			msgWantErr(t, send(map[string]any{"a": "x", "unused": strings.Repeat("€", 1601)}), 400, "VALIDATION_ERROR", "data.unused")
			// Too many keys, a key that can be no variable, too many bytes.
			many := map[string]any{"a": "x"}
			for i := range 100 {
				many["k"+strings.Repeat("0", i%3)+string(rune('a'+i%26))+strings.Repeat("z", i/26)] = "v"
			}
			msgWantErr(t, send(many), 400, "VALIDATION_ERROR", "data")
			msgWantErr(t, send(map[string]any{"a": "x", strings.Repeat("k", 65): "v"}), 400, "VALIDATION_ERROR", "data")
			big := map[string]any{"a": "x"}
			for i := range 25 {
				big["v"+strings.Repeat("w", i)] = strings.Repeat("b", 1400)
			}
			msgWantErr(t, send(big), 400, "VALIDATION_ERROR", "data")
		}},
		{"campaigns", func(t *testing.T, s *server, db string) {
			tn := msgTenant(t, db)
			msgCreateTemplate(t, s, tn.Test, "rep", strings.Repeat("{{a}}", 320))
			// With a list of numbers, creation renders and refuses at once.
			r := s.do(t, "POST", "/v1/campaigns", tn.Test, map[string]any{"name": "c", "template": "rep",
				"data": map[string]any{"a": strings.Repeat("x", 1600)}, "to": []string{msgAwake(t)}})
			msgWantErr(t, r, 400, "VALIDATION_ERROR", "data")
			r = s.do(t, "POST", "/v1/campaigns", tn.Test, map[string]any{"name": "c", "template": "rep",
				"data": map[string]any{"a": strings.Repeat("x", 1601)}, "all_contacts": true})
			msgWantErr(t, r, 400, "VALIDATION_ERROR", "data.a")
			// With contacts, each recipient's text is rendered by the runner,
			// which skips those that would be too long.
			for range 10 {
				s.do(t, "POST", "/v1/contacts", tn.Test, map[string]any{"phone": msgAwake(t)})
			}
			c := cmpCreate(t, s, tn.Test, map[string]any{"name": "c", "template": "rep",
				"data": map[string]any{"a": strings.Repeat("x", 1600)}, "all_contacts": true})
			cmpLaunch(t, s, tn.Test, c["id"].(string))
			cmpAwait(t, s, tn.Test, c["id"].(string), "campaign completed, every recipient skipped", func(c map[string]any) bool {
				return c["status"] == "completed" && cmpWant(cmpCounts(c), map[string]int{"total": 10, "skipped_invalid": 10})
			})
		}},
	})
}

// TestRenderingAttackMemory sends the review's attack, a 1,600-character
// template of {{a}} with 1 MB of data.a, eight at a time as sends and as
// campaigns, and checks each answer and how much the process allocated in
// all. Rendering it in full would take 320 MB a request; the bound is what
// reading and decoding eight bodies of 1 MB costs, with room to spare. It
// does not run in parallel, so the process's allocations are its own.
func TestRenderingAttackMemory(t *testing.T) {
	s := startServer(t, sqliteURL(t))
	tn := msgTenant(t, s.DB)
	msgCreateTemplate(t, s, tn.Test, "rep", strings.Repeat("{{a}}", 320))
	huge := strings.Repeat("x", 1_000_000)
	sendBody, _ := json.Marshal(map[string]any{"to": msgAwake(t), "template": "rep", "data": map[string]any{"a": huge}})
	campaignBody, _ := json.Marshal(map[string]any{"name": "c", "template": "rep", "data": map[string]any{"a": huge}, "all_contacts": true})

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for range 8 {
		for _, req := range []struct {
			path string
			body []byte
		}{{"/v1/messages", sendBody}, {"/v1/campaigns", campaignBody}} {
			wg.Go(func() {
				r := s.do(t, "POST", req.path, tn.Test, req.body)
				if r.Status != http.StatusBadRequest || r.Code() != "VALIDATION_ERROR" || r.Field() != "data.a" {
					t.Errorf("POST %s: want 400 VALIDATION_ERROR field data.a, got %d %.200s", req.path, r.Status, r.Raw)
				}
			})
		}
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	const limit = 400 << 20
	if got := after.TotalAlloc - before.TotalAlloc; got > limit {
		t.Fatalf("16 refused requests of 1 MB allocated %d MiB in all, want under %d MiB", got>>20, limit>>20)
	} else {
		t.Logf("16 refused requests of 1 MB allocated %d MiB in all", got>>20)
	}
}
