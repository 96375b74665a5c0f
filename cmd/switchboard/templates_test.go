package main

// End-to-end tests of /v1/templates and of sends that name a template.
// Helpers (msgTenant, msgAwake, msgSend, ...) are in messages_test.go.

import (
	"net/http"
	"strings"
	"testing"
)

// msgCreateTemplate creates a template and asserts 201; it returns data.
func msgCreateTemplate(t testing.TB, s *server, key, name, body string) map[string]any {
	t.Helper()
	r := s.do(t, "POST", "/v1/templates", key, map[string]any{"name": name, "body": body})
	if r.Status != http.StatusCreated {
		t.Fatalf("create template %s: %d %s", name, r.Status, r.Raw)
	}
	return r.Data()
}

func TestTemplateCRUD(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)

		d := msgCreateTemplate(t, s, tn.Live, "order_shipped", "Hi {{ name }}, order {{order}} shipped. Thanks, {{name}}!")
		if d["name"] != "order_shipped" || d["body"] != "Hi {{ name }}, order {{order}} shipped. Thanks, {{name}}!" ||
			d["id"] == "" || d["created_at"] == nil {
			t.Fatalf("created: %v", d)
		}
		if vars, _ := d["variables"].([]any); len(vars) != 2 || vars[0] != "name" || vars[1] != "order" {
			t.Fatalf("variables %v, want [name order]", d["variables"])
		}
		id := d["id"].(string)
		if plain := msgCreateTemplate(t, s, tn.Live, "plain-1", "No variables here"); len(plain["variables"].([]any)) != 0 {
			t.Fatalf("plain template variables: %v", plain["variables"])
		}

		// Duplicate name in the same environment.
		msgWantErr(t, s.do(t, "POST", "/v1/templates", tn.Live, map[string]any{"name": "order_shipped", "body": "other"}), 409, "DUPLICATE_TEMPLATE", "")

		for _, c := range []struct {
			name  string
			body  any
			field string
		}{
			{"upper-case name", map[string]any{"name": "Order", "body": "x"}, "name"},
			{"space in name", map[string]any{"name": "order shipped", "body": "x"}, "name"},
			{"empty name", map[string]any{"name": "", "body": "x"}, "name"},
			{"65-character name", map[string]any{"name": strings.Repeat("a", 65), "body": "x"}, "name"},
			{"missing name", map[string]any{"body": "x"}, "name"},
			{"missing body", map[string]any{"name": "t1"}, "body"},
			{"empty body", map[string]any{"name": "t1", "body": ""}, "body"},
			{"body of 1601 characters", map[string]any{"name": "t1", "body": strings.Repeat("x", 1601)}, "body"},
			{"space inside a variable name", map[string]any{"name": "t1", "body": "Hi {{first name}}"}, "body"},
			{"empty placeholder", map[string]any{"name": "t1", "body": "Hi {{ }}"}, "body"},
			{"unclosed placeholder", map[string]any{"name": "t1", "body": "Hi {{name"}, "body"},
			{"variable starting with a digit", map[string]any{"name": "t1", "body": "Hi {{1st}}"}, "body"},
			{"unknown field", map[string]any{"name": "t1", "body": "x", "vars": []string{}}, "vars"},
			{"name of wrong type", map[string]any{"name": 7, "body": "x"}, "name"},
		} {
			r := s.do(t, "POST", "/v1/templates", tn.Live, c.body)
			if r.Status != 400 || r.Code() != "VALIDATION_ERROR" || r.Field() != c.field {
				t.Errorf("%s: want 400 VALIDATION_ERROR field %s, got %d %s", c.name, c.field, r.Status, r.Raw)
			}
		}
		msgCreateTemplate(t, s, tn.Live, strings.Repeat("a", 64), strings.Repeat("y", 1600))

		// Get.
		r := s.do(t, "GET", "/v1/templates/"+id, tn.Live, nil)
		if r.Status != 200 || r.Data()["name"] != "order_shipped" || r.Data()["id"] != id {
			t.Fatalf("get: %d %s", r.Status, r.Raw)
		}

		// List: newest first, paginated through Link.
		list := s.do(t, "GET", "/v1/templates", tn.Live, nil)
		all := msgIDs(list.List())
		if list.Status != 200 || len(all) != 3 || all[2] != id || list.Header.Get("Link") != "" {
			t.Fatalf("list: %d %v Link %q", list.Status, all, list.Header.Get("Link"))
		}
		first := s.do(t, "GET", "/v1/templates?limit=1", tn.Live, nil)
		if l := first.Header.Get("Link"); !msgLinkRE.MatchString(l) || !strings.Contains(l, "after="+all[0]) || !strings.Contains(l, "limit=1") {
			t.Fatalf("first page Link %q", l)
		}
		got, pages := msgPages(t, s, tn.Live, "/v1/templates?limit=1")
		if strings.Join(got, ",") != strings.Join(all, ",") || pages != 3 {
			t.Fatalf("pages: %v in %d pages, want %v", got, pages, all)
		}
		for _, q := range []string{"limit=0", "limit=101", "limit=x"} {
			msgWantErr(t, s.do(t, "GET", "/v1/templates?"+q, tn.Live, nil), 400, "VALIDATION_ERROR", "limit")
		}

		// Another tenant sees none of it.
		other := msgTenant(t, db)
		msgWantErr(t, s.do(t, "GET", "/v1/templates/"+id, other.Live, nil), 404, "NOT_FOUND", "")
		msgWantErr(t, s.do(t, "DELETE", "/v1/templates/"+id, other.Live, nil), 404, "NOT_FOUND", "")
		if l := s.do(t, "GET", "/v1/templates", other.Live, nil); len(l.List()) != 0 {
			t.Fatalf("other tenant lists %s", l.Raw)
		}
		// ... and may use the same name.
		msgCreateTemplate(t, s, other.Live, "order_shipped", "Hello")

		// Delete.
		r = s.do(t, "DELETE", "/v1/templates/"+id, tn.Live, nil)
		if r.Status != 200 || r.Data()["id"] != id || r.Data()["deleted"] != true {
			t.Fatalf("delete: %d %s", r.Status, r.Raw)
		}
		msgWantErr(t, s.do(t, "GET", "/v1/templates/"+id, tn.Live, nil), 404, "NOT_FOUND", "")
		msgWantErr(t, s.do(t, "DELETE", "/v1/templates/"+id, tn.Live, nil), 404, "NOT_FOUND", "")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "template": "order_shipped", "data": map[string]any{"name": "A", "order": 1}}),
			400, "INVALID_TEMPLATE", "")
		// The name is free again.
		msgCreateTemplate(t, s, tn.Live, "order_shipped", "Back {{again}}")
	})
}

func TestTemplateSend(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		msgCreateTemplate(t, s, tn.Live, "shipped", "Hi {{ name }}, order {{order}} shipped{{ suffix}}")
		to := msgAwake(t)

		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": to, "template": "unknown", "data": map[string]any{}}),
			400, "INVALID_TEMPLATE", "")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": to, "template": "shipped", "data": map[string]any{"name": "Ada", "order": 7}}),
			400, "MISSING_TEMPLATE_VAR", "data.suffix")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": to, "template": "shipped"}),
			400, "MISSING_TEMPLATE_VAR", "data.name")

		// Numbers and booleans are rendered as written; an empty string is a
		// value; keys the template does not use are ignored.
		d := msgSend(t, s, tn.Live, map[string]any{"to": to, "template": "shipped",
			"data": map[string]any{"name": "Ada", "order": 1234, "suffix": "", "unused": true, "more": "ignored"}})
		id := d["message_id"].(string)
		m := msgWait(t, s, tn.Live, id, "delivered")
		if m["body"] != "Hi Ada, order 1234 shipped" || m["template"] != "shipped" {
			t.Fatalf("rendered message: body %q template %v", m["body"], m["template"])
		}
		d = msgSend(t, s, tn.Live, map[string]any{"to": to, "template": "shipped",
			"data": map[string]any{"name": "{{order}}", "order": 2.5, "suffix": true}})
		if m := msgGet(t, s, tn.Live, d["message_id"].(string)); m["body"] != "Hi {{order}}, order 2.5 shippedtrue" {
			t.Fatalf("values are inserted as they are: %q", m["body"])
		}

		// A rendered body over 1600 characters is refused.
		msgCreateTemplate(t, s, tn.Live, "long", strings.Repeat("x", 1590)+"{{v}}")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": to, "template": "long", "data": map[string]any{"v": strings.Repeat("y", 11)}}),
			400, "VALIDATION_ERROR", "data")
		msgSend(t, s, tn.Live, map[string]any{"to": to, "template": "long", "data": map[string]any{"v": strings.Repeat("y", 10)}})
	})
}

func TestTemplateEnvironments(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		d := msgCreateTemplate(t, s, tn.Test, "welcome", "Welcome {{name}}")
		id := d["id"].(string)
		to := msgAwake(t)

		// Invisible to the live key.
		msgWantErr(t, s.do(t, "GET", "/v1/templates/"+id, tn.Live, nil), 404, "NOT_FOUND", "")
		msgWantErr(t, s.do(t, "DELETE", "/v1/templates/"+id, tn.Live, nil), 404, "NOT_FOUND", "")
		if l := s.do(t, "GET", "/v1/templates", tn.Live, nil); l.Status != 200 || len(l.List()) != 0 {
			t.Fatalf("live list: %d %s", l.Status, l.Raw)
		}
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": to, "template": "welcome", "data": map[string]any{"name": "A"}}),
			400, "INVALID_TEMPLATE", "")

		// Usable with the test key.
		m := msgSend(t, s, tn.Test, map[string]any{"to": to, "template": "welcome", "data": map[string]any{"name": "A"}})
		if got := msgWait(t, s, tn.Test, m["message_id"].(string), "delivered"); got["body"] != "Welcome A" || got["livemode"] != false {
			t.Fatalf("test-mode template send: %v", got)
		}

		// The same name can exist in live as a different template.
		live := msgCreateTemplate(t, s, tn.Live, "welcome", "Live welcome {{name}}")
		if live["id"] == id {
			t.Fatal("live and test templates share an id")
		}
		m = msgSend(t, s, tn.Live, map[string]any{"to": to, "template": "welcome", "data": map[string]any{"name": "B"}})
		if got := msgGet(t, s, tn.Live, m["message_id"].(string)); got["body"] != "Live welcome B" {
			t.Fatalf("live send used %q", got["body"])
		}
		if l := s.do(t, "GET", "/v1/templates", tn.Test, nil); len(l.List()) != 1 || l.List()[0]["id"] != id {
			t.Fatalf("test list: %s", l.Raw)
		}
	})
}
