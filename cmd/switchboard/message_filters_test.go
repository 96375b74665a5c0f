package main

import (
	"encoding/json"
	"net/url"
	"slices"
	"testing"
	"time"
)

// TestMessageFilters: GET /v1/messages filters by from, campaign_id and a
// created_at range (both bounds exclusive), combined with AND and kept in
// the Link of the next page.
func TestMessageFilters(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := ctTenant(t, db)
		key := tn.Test
		var second struct{ Number string }
		if err := json.Unmarshal([]byte(cli(t, db, "phone", "add", "--tenant", tn.ID, "--number", "+15550109999", "--daily-limit", "0")), &second); err != nil {
			t.Fatal(err)
		}
		p1, p2 := tn.Phone.Number, second.Number
		send := func(from, to string) map[string]any {
			return msgSend(t, s, key, map[string]any{"to": to, "body": "hi", "from": from})
		}
		m1 := send(p1, "+15005550000")
		m2 := send(p2, "+15005550002")
		m3 := send(p1, "+15005550005")
		in := msgInbound(t, s, key, "+15005550006", "hello")

		ids := func(query string) []string {
			t.Helper()
			r := s.do(t, "GET", "/v1/messages"+query, key, nil)
			if r.Status != 200 {
				t.Fatalf("GET /v1/messages%s: %d %s", query, r.Status, r.Raw)
			}
			var out []string
			for _, m := range r.List() {
				out = append(out, m["id"].(string))
			}
			return out
		}
		q := func(kv ...string) string {
			v := url.Values{}
			for i := 0; i+1 < len(kv); i += 2 {
				v.Set(kv[i], kv[i+1])
			}
			return "?" + v.Encode()
		}
		id := func(m map[string]any) string {
			if v, ok := m["message_id"].(string); ok {
				return v
			}
			return m["id"].(string)
		}
		at := func(m map[string]any) string { return m["created_at"].(string) }
		for query, want := range map[string][]string{
			q("from", p1):                                                      {id(m3), id(m1)},
			q("from", p2):                                                      {id(m2)},
			q("from", "+15005550006"):                                          {id(in)},
			q("from", p1, "direction", "inbound"):                              nil,
			q("created_after", at(m1)):                                         {id(in), id(m3), id(m2)},
			q("created_before", at(m3)):                                        {id(m2), id(m1)},
			q("created_after", at(m1), "created_before", at(m3)):               {id(m2)},
			q("created_after", at(m1), "from", p1):                             {id(m3)},
			q("created_before", "2000-01-01T00:00:00Z"):                        nil,
			q("created_after", "2000-01-01T00:00:00+01:00"):                    {id(in), id(m3), id(m2), id(m1)},
			q("created_after", time.Now().Add(time.Hour).Format(time.RFC3339)): nil,
			q("campaign_id", "01ARZ3NDEKTSV4RRFFQ69G5FAV"):                     nil,
		} {
			if got := ids(query); !slices.Equal(got, want) {
				t.Errorf("GET /v1/messages%s: %v, want %v", query, got, want)
			}
		}
		// The next page keeps the filters.
		r := s.do(t, "GET", "/v1/messages"+q("from", p1, "limit", "1"), key, nil)
		next := nextLink(r.Header.Get("Link"))
		if len(r.List()) != 1 || r.List()[0]["id"] != id(m3) || next == "" {
			t.Fatalf("first page: %s, Link %q", r.Raw, r.Header.Get("Link"))
		}
		if got := ids(next[len("/v1/messages"):]); !slices.Equal(got, []string{id(m1)}) {
			t.Errorf("next page %s: %v, want only %s", next, got, id(m1))
		}
		for query, field := range map[string]string{
			q("created_after", "yesterday"):   "created_after",
			q("created_before", "2026-01-31"): "created_before",
		} {
			msgWantErr(t, s.do(t, "GET", "/v1/messages"+query, key, nil), 400, "VALIDATION_ERROR", field)
		}
		msgWantErr(t, s.do(t, "GET", "/v1/messages"+q("from", "15005550000"), key, nil), 400, "INVALID_PHONE_NUMBER", "from")
	})
}
