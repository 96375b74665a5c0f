package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// ctTenant creates a tenant on the Scale plan (no rate limit, no quota), so
// that tests may poll.
func ctTenant(t testing.TB, db string, extra ...string) tenant {
	t.Helper()
	return newTenant(t, db, append([]string{"--plan", "scale"}, extra...)...)
}

// ctWantErr is wantError that also checks details.field when field is set.
func ctWantErr(t testing.TB, what string, r *response, status int, code, field string) {
	t.Helper()
	wantError(t, what, r, status, code)
	if field != "" && r.Field() != field {
		t.Fatalf("%s: details.field %q, want %q (%s)", what, r.Field(), field, r.Raw)
	}
}

// ctCreate creates a contact and returns it.
func ctCreate(t testing.TB, s *server, key string, body map[string]any) map[string]any {
	t.Helper()
	r := s.do(t, "POST", "/v1/contacts", key, body)
	if r.Status != http.StatusCreated {
		t.Fatalf("create contact %v: %d %s", body, r.Status, r.Raw)
	}
	return r.Data()
}

func ctGet(t testing.TB, s *server, key, id string) map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/contacts/"+id, key, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("get contact %s: %d %s", id, r.Status, r.Raw)
	}
	return r.Data()
}

func ctExistingID(r *response) string {
	d, _ := r.Body["details"].(map[string]any)
	s, _ := d["existing_id"].(string)
	return s
}

func TestContactCRUD(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := ctTenant(t, db)
		key := tn.Live

		c := ctCreate(t, s, key, map[string]any{"phone": "+14155550100", "name": "Ada Lovelace",
			"fields": map[string]any{"city": "London", "plan_tier": "gold"}})
		id, _ := c["id"].(string)
		if id == "" || c["phone"] != "+14155550100" || c["name"] != "Ada Lovelace" || c["opted_out"] != false ||
			c["created_at"] != c["updated_at"] {
			t.Fatalf("created contact: %v", c)
		}
		if f, _ := c["fields"].(map[string]any); f["city"] != "London" || f["plan_tier"] != "gold" || len(f) != 2 {
			t.Fatalf("fields: %v", c["fields"])
		}
		bare := ctCreate(t, s, key, map[string]any{"phone": "+14155550101"})
		if bare["name"] != nil || len(bare["fields"].(map[string]any)) != 0 {
			t.Fatalf("contact without name and fields: %v", bare)
		}
		if got := ctGet(t, s, key, id); got["name"] != "Ada Lovelace" || got["phone"] != "+14155550100" {
			t.Fatalf("get: %v", got)
		}

		// The same phone again: 409 with the existing contact's id.
		r := s.do(t, "POST", "/v1/contacts", key, map[string]any{"phone": "+14155550100", "name": "Someone else"})
		ctWantErr(t, "duplicate phone", r, 409, "DUPLICATE_CONTACT", "")
		if ctExistingID(r) != id {
			t.Fatalf("details.existing_id %q, want %q", ctExistingID(r), id)
		}

		for _, tc := range []struct {
			body        any
			status      int
			code, field string
		}{
			{map[string]any{}, 400, "VALIDATION_ERROR", "phone"},
			{map[string]any{"name": "No phone"}, 400, "VALIDATION_ERROR", "phone"},
			{map[string]any{"phone": 14155550100}, 400, "VALIDATION_ERROR", "phone"},
			{map[string]any{"phone": "+14155550102", "nickname": "x"}, 400, "VALIDATION_ERROR", "nickname"},
			{map[string]any{"phone": "+14155550102", "name": ""}, 400, "VALIDATION_ERROR", "name"},
			{map[string]any{"phone": "+14155550102", "name": strings.Repeat("n", 257)}, 400, "VALIDATION_ERROR", "name"},
			{map[string]any{"phone": "+14155550102", "fields": []string{"a"}}, 400, "VALIDATION_ERROR", "fields"},
			{map[string]any{"phone": "+14155550102", "fields": map[string]any{"age": 3}}, 400, "VALIDATION_ERROR", "fields.age"},
			{map[string]any{"phone": "+14155550102", "fields": map[string]any{"first name": "x"}}, 400, "VALIDATION_ERROR", "fields"},
			{map[string]any{"phone": "+14155550102", "fields": map[string]any{"bio": strings.Repeat("b", 501)}}, 400, "VALIDATION_ERROR", "fields.bio"},
			{map[string]any{"phone": "+14155550102", "fields": ctManyFields(51)}, 400, "VALIDATION_ERROR", "fields"},
			// VALIDATION_ERROR comes before INVALID_PHONE_NUMBER.
			{map[string]any{"phone": "14155550102", "name": ""}, 400, "VALIDATION_ERROR", "name"},
			{map[string]any{"phone": "14155550102"}, 400, "INVALID_PHONE_NUMBER", "phone"},
			{map[string]any{"phone": "+1 415 555 0102"}, 400, "INVALID_PHONE_NUMBER", "phone"},
			{"not json", 400, "VALIDATION_ERROR", "body"},
		} {
			r := s.do(t, "POST", "/v1/contacts", key, tc.body)
			ctWantErr(t, fmt.Sprintf("create %v", tc.body), r, tc.status, tc.code, tc.field)
		}
		// The limits themselves are accepted.
		ctCreate(t, s, key, map[string]any{"phone": "+14155550103", "name": strings.Repeat("n", 256),
			"fields": ctManyFields(50)})

		// PATCH changes only what it is given.
		r = s.do(t, "PATCH", "/v1/contacts/"+id, key, map[string]any{"name": "Ada King"})
		if r.Status != 200 || r.Data()["name"] != "Ada King" || r.Data()["phone"] != "+14155550100" ||
			r.Data()["fields"].(map[string]any)["city"] != "London" || r.Data()["updated_at"] == c["updated_at"] ||
			r.Data()["created_at"] != c["created_at"] {
			t.Fatalf("patch name: %d %s", r.Status, r.Raw)
		}
		r = s.do(t, "PATCH", "/v1/contacts/"+id, key, map[string]any{"fields": map[string]any{"country": "UK"}, "phone": "+14155550109"})
		if f := r.Data()["fields"].(map[string]any); r.Status != 200 || len(f) != 1 || f["country"] != "UK" || r.Data()["phone"] != "+14155550109" {
			t.Fatalf("patch fields and phone: %d %s", r.Status, r.Raw)
		}
		r = s.do(t, "PATCH", "/v1/contacts/"+id, key, map[string]any{"name": nil, "fields": nil})
		if r.Status != 200 || r.Data()["name"] != nil || len(r.Data()["fields"].(map[string]any)) != 0 {
			t.Fatalf("patch clearing name and fields: %d %s", r.Status, r.Raw)
		}
		if r := s.do(t, "PATCH", "/v1/contacts/"+id, key, map[string]any{}); r.Status != 200 || r.Data()["phone"] != "+14155550109" {
			t.Fatalf("empty patch: %d %s", r.Status, r.Raw)
		}
		// The old phone is free again; another contact's phone is not.
		ctCreate(t, s, key, map[string]any{"phone": "+14155550100"})
		r = s.do(t, "PATCH", "/v1/contacts/"+id, key, map[string]any{"phone": "+14155550101"})
		ctWantErr(t, "patch to another contact's phone", r, 409, "DUPLICATE_CONTACT", "")
		if ctExistingID(r) != bare["id"] {
			t.Fatalf("details.existing_id %q, want %v", ctExistingID(r), bare["id"])
		}
		ctWantErr(t, "patch bad phone", s.do(t, "PATCH", "/v1/contacts/"+id, key, map[string]any{"phone": "0044"}), 400, "INVALID_PHONE_NUMBER", "phone")
		ctWantErr(t, "patch unknown field", s.do(t, "PATCH", "/v1/contacts/"+id, key, map[string]any{"id": "x"}), 400, "VALIDATION_ERROR", "id")
		ctWantErr(t, "patch bad name", s.do(t, "PATCH", "/v1/contacts/"+id, key, map[string]any{"name": 5}), 400, "VALIDATION_ERROR", "name")
		ctWantErr(t, "patch unknown id", s.do(t, "PATCH", "/v1/contacts/01HZZZZZZZZZZZZZZZZZZZZZZZ", key, map[string]any{"name": "x"}), 404, "CONTACT_NOT_FOUND", "")

		// DELETE, then the id is gone.
		r = s.do(t, "DELETE", "/v1/contacts/"+id, key, nil)
		if r.Status != 200 || r.Data()["id"] != id || r.Data()["deleted"] != true {
			t.Fatalf("delete: %d %s", r.Status, r.Raw)
		}
		ctWantErr(t, "get deleted", s.do(t, "GET", "/v1/contacts/"+id, key, nil), 404, "CONTACT_NOT_FOUND", "")
		ctWantErr(t, "delete again", s.do(t, "DELETE", "/v1/contacts/"+id, key, nil), 404, "CONTACT_NOT_FOUND", "")
		// Its phone can be used again.
		ctCreate(t, s, key, map[string]any{"phone": "+14155550109"})
	})
}

func ctManyFields(n int) map[string]any {
	f := map[string]any{}
	for i := range n {
		f[fmt.Sprintf("f%d", i)] = "v"
	}
	return f
}

// TestContactIsolation: another tenant's contact, and a contact of the other
// environment, answer 404 CONTACT_NOT_FOUND as if they did not exist.
func TestContactIsolation(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		a, b := ctTenant(t, db), ctTenant(t, db)
		live := ctCreate(t, s, a.Live, map[string]any{"phone": "+14155550110", "name": "Live"})
		id := live["id"].(string)
		for _, key := range []string{b.Live, b.Test, a.Test} {
			ctWantErr(t, "get", s.do(t, "GET", "/v1/contacts/"+id, key, nil), 404, "CONTACT_NOT_FOUND", "")
			ctWantErr(t, "patch", s.do(t, "PATCH", "/v1/contacts/"+id, key, map[string]any{"name": "x"}), 404, "CONTACT_NOT_FOUND", "")
			ctWantErr(t, "delete", s.do(t, "DELETE", "/v1/contacts/"+id, key, nil), 404, "CONTACT_NOT_FOUND", "")
			if r := s.do(t, "GET", "/v1/contacts", key, nil); r.Status != 200 || len(r.List()) != 0 {
				t.Fatalf("list with another tenant's or environment's key: %d %s", r.Status, r.Raw)
			}
		}
		// The same phone is free in the test environment and in another tenant.
		test := ctCreate(t, s, a.Test, map[string]any{"phone": "+14155550110", "name": "Test"})
		ctCreate(t, s, b.Live, map[string]any{"phone": "+14155550110"})
		if got := ctGet(t, s, a.Live, id); got["name"] != "Live" {
			t.Fatalf("live contact changed: %v", got)
		}
		if got := ctGet(t, s, a.Test, test["id"].(string)); got["name"] != "Test" {
			t.Fatalf("test contact: %v", got)
		}
		if r := s.do(t, "GET", "/v1/contacts", a.Live, nil); len(r.List()) != 1 || r.List()[0]["id"] != id {
			t.Fatalf("live list: %s", r.Raw)
		}
	})
}

func TestContactListPagination(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := ctTenant(t, db)
		var ids []string
		for i := range 5 {
			c := ctCreate(t, s, tn.Test, map[string]any{"phone": fmt.Sprintf("+1415555012%d", i)})
			ids = append(ids, c["id"].(string))
		}
		// Newest first, two at a time, by the Link header.
		got, pages := msgPages(t, s, tn.Test, "/v1/contacts?limit=2")
		if pages != 3 || len(got) != 5 {
			t.Fatalf("%d pages, ids %v", pages, got)
		}
		for i := range ids {
			if got[i] != ids[len(ids)-1-i] {
				t.Fatalf("order %v, want newest first of %v", got, ids)
			}
		}
		// Filter by phone.
		r := s.do(t, "GET", "/v1/contacts?phone=%2B14155550122", tn.Test, nil)
		if r.Status != 200 || len(r.List()) != 1 || r.List()[0]["id"] != ids[2] || r.Header.Get("Link") != "" {
			t.Fatalf("phone filter: %d %s", r.Status, r.Raw)
		}
		if r := s.do(t, "GET", "/v1/contacts?phone=%2B14155550199", tn.Test, nil); r.Status != 200 || len(r.List()) != 0 {
			t.Fatalf("phone filter, no match: %d %s", r.Status, r.Raw)
		}
		ctWantErr(t, "bad phone filter", s.do(t, "GET", "/v1/contacts?phone=12345", tn.Test, nil), 400, "INVALID_PHONE_NUMBER", "")
		ctWantErr(t, "bad limit", s.do(t, "GET", "/v1/contacts?limit=0", tn.Test, nil), 400, "VALIDATION_ERROR", "limit")
		ctWantErr(t, "bad limit", s.do(t, "GET", "/v1/contacts?limit=101", tn.Test, nil), 400, "VALIDATION_ERROR", "limit")
	})
}

// TestContactOptedOut: opted_out is the recipient's state, changed by STOP
// and START whether the contact exists before or after.
func TestContactOptedOut(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := ctTenant(t, db)
		inbound := func(from, body string) {
			t.Helper()
			if r := s.do(t, "POST", "/v1/test/inbound", tn.Test, map[string]any{"from": from, "body": body}); r.Status != 200 {
				t.Fatalf("inbound %s: %d %s", body, r.Status, r.Raw)
			}
		}
		c := ctCreate(t, s, tn.Test, map[string]any{"phone": "+14155550130"})
		id := c["id"].(string)
		inbound("+14155550130", "STOP")
		if got := ctGet(t, s, tn.Test, id); got["opted_out"] != true {
			t.Fatalf("after STOP: %v", got)
		}
		r := s.do(t, "GET", "/v1/contacts?phone=%2B14155550130", tn.Test, nil)
		if len(r.List()) != 1 || r.List()[0]["opted_out"] != true {
			t.Fatalf("list after STOP: %s", r.Raw)
		}
		inbound("+14155550130", " start ")
		if got := ctGet(t, s, tn.Test, id); got["opted_out"] != false {
			t.Fatalf("after START: %v", got)
		}
		// STOP before the contact exists.
		inbound("+14155550131", "unsubscribe")
		if c := ctCreate(t, s, tn.Test, map[string]any{"phone": "+14155550131"}); c["opted_out"] != true {
			t.Fatalf("contact of an opted-out number: %v", c)
		}
		// A phone change takes the new number's state.
		r = s.do(t, "PATCH", "/v1/contacts/"+id, tn.Test, map[string]any{"phone": "+14155550132"})
		if r.Status != 200 || r.Data()["opted_out"] != false {
			t.Fatalf("patch phone: %d %s", r.Status, r.Raw)
		}
		inbound("+14155550132", "STOP")
		if got := ctGet(t, s, tn.Test, id); got["opted_out"] != true {
			t.Fatalf("after STOP to the new number: %v", got)
		}
		// Opt-out is per environment: the live contact of the same number is
		// opted in.
		live := ctCreate(t, s, tn.Live, map[string]any{"phone": "+14155550132"})
		if live["opted_out"] != false {
			t.Fatalf("live contact: %v", live)
		}
	})
}

type ctImportRow struct {
	Row        int    `json:"row"`
	Status     string `json:"status"`
	ID         string `json:"id"`
	ExistingID string `json:"existing_id"`
	Error      string `json:"error"`
}

func ctImport(t testing.TB, s *server, key, csv string) (created, duplicates, invalid int, rows []ctImportRow) {
	t.Helper()
	r := s.do(t, "POST", "/v1/contacts/import", key, csv, "Content-Type", "text/csv")
	if r.Status != 200 {
		t.Fatalf("import: %d %s", r.Status, r.Raw)
	}
	d := r.Data()
	for _, v := range d["rows"].([]any) {
		m := v.(map[string]any)
		row := ctImportRow{Status: m["status"].(string)}
		row.Row = int(m["row"].(float64))
		row.ID, _ = m["id"].(string)
		row.ExistingID, _ = m["existing_id"].(string)
		row.Error, _ = m["error"].(string)
		rows = append(rows, row)
	}
	return int(d["created"].(float64)), int(d["duplicates"].(float64)), int(d["invalid"].(float64)), rows
}

func TestContactImport(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := ctTenant(t, db)
		key := tn.Live
		existing := ctCreate(t, s, key, map[string]any{"phone": "+14155550140", "name": "Already here"})

		csv := "\uFEFFPhone,Name,city,code\r\n" + // a spreadsheet's BOM, header case
			"+14155550141,Ada,London,A1\r\n" + // line 2: created
			"+14155550140,Dup,Paris,\r\n" + // line 3: duplicate of an existing contact
			"4155550142,Bad,Rome,\r\n" + // line 4: invalid phone
			"\"+14155550143\",\"Multi\nline\",Oslo,\r\n" + // lines 5-6: created, the name spans two lines
			"+14155550141,Again,Berlin,\r\n" + // line 7: duplicate of line 2
			"+14155550144,Short\r\n" + // line 8: too few columns
			"+14155550145,,," + strings.Repeat("x", 501) + "\r\n" + // line 9: value too long
			" +14155550146 ,,Lima,\r\n" + // line 10: created (phone trimmed), no name, no code
			"+1 (415) 555-0147,Spaced,,\r\n" + // line 11: created: the separators a spreadsheet writes
			"+1 415 555 0140,Spaced dup,,\r\n" // line 12: duplicate of the existing contact, written with spaces
		created, dups, invalid, rows := ctImport(t, s, key, csv)
		if created != 4 || dups != 3 || invalid != 3 || len(rows) != 10 {
			t.Fatalf("report: created %d, duplicates %d, invalid %d, rows %+v", created, dups, invalid, rows)
		}
		want := []struct {
			row    int
			status string
		}{{2, "created"}, {3, "duplicate"}, {4, "invalid"}, {5, "created"}, {7, "duplicate"}, {8, "invalid"}, {9, "invalid"}, {10, "created"},
			{11, "created"}, {12, "duplicate"}}
		for i, w := range want {
			if rows[i].Row != w.row || rows[i].Status != w.status {
				t.Fatalf("row %d: %+v, want %+v", i, rows[i], w)
			}
			switch w.status {
			case "created":
				if rows[i].ID == "" || rows[i].ExistingID != "" || rows[i].Error != "" {
					t.Fatalf("created row: %+v", rows[i])
				}
			case "duplicate":
				if rows[i].ExistingID == "" || rows[i].ID != "" {
					t.Fatalf("duplicate row: %+v", rows[i])
				}
			case "invalid":
				if rows[i].Error == "" || rows[i].ID != "" {
					t.Fatalf("invalid row: %+v", rows[i])
				}
			}
		}
		if rows[1].ExistingID != existing["id"] {
			t.Fatalf("duplicate of an existing contact: %+v, want %v", rows[1], existing["id"])
		}
		if !strings.Contains(rows[2].Error, `phone "4155550142" is not an E.164 number`) {
			t.Errorf("an invalid phone's row does not echo the value: %q", rows[2].Error)
		}
		if c := ctGet(t, s, key, rows[8].ID); c["phone"] != "+14155550147" {
			t.Errorf("a phone written with separators: %v, want +14155550147", c["phone"])
		}
		if rows[9].ExistingID != existing["id"] {
			t.Errorf("a phone written with spaces is not a duplicate of the same number: %+v", rows[9])
		}
		if rows[4].ExistingID != rows[0].ID {
			t.Fatalf("duplicate within the file: %+v, want %s", rows[4], rows[0].ID)
		}
		ada := ctGet(t, s, key, rows[0].ID)
		if ada["phone"] != "+14155550141" || ada["name"] != "Ada" {
			t.Fatalf("imported contact: %v", ada)
		}
		if f := ada["fields"].(map[string]any); len(f) != 2 || f["city"] != "London" || f["code"] != "A1" {
			t.Fatalf("imported fields: %v", ada["fields"])
		}
		if c := ctGet(t, s, key, rows[3].ID); c["name"] != "Multi\nline" || len(c["fields"].(map[string]any)) != 1 {
			t.Fatalf("quoted row: %v", c)
		}
		if c := ctGet(t, s, key, rows[7].ID); c["phone"] != "+14155550146" || c["name"] != nil {
			t.Fatalf("row with empty cells: %v", c)
		}
		if got := ctGet(t, s, key, existing["id"].(string)); got["name"] != "Already here" {
			t.Fatalf("an import changed an existing contact: %v", got)
		}

		// Importing the same file again creates nothing.
		created, dups, invalid, _ = ctImport(t, s, key, csv)
		if created != 0 || dups != 7 || invalid != 3 {
			t.Fatalf("second import: created %d, duplicates %d, invalid %d", created, dups, invalid)
		}
		// A header only is an empty import; imported contacts stay in their environment.
		if created, _, _, rows := ctImport(t, s, tn.Test, "phone\n"); created != 0 || len(rows) != 0 {
			t.Fatalf("header only: %d %v", created, rows)
		}
		if created, _, _, _ := ctImport(t, s, tn.Test, "phone\n+14155550141\n"); created != 1 {
			t.Fatal("the same phone in the test environment was not created")
		}

		for _, tc := range []struct {
			what, body, ctype, field string
		}{
			{"no phone column", "name,city\nAda,London\n", "text/csv", "header"},
			{"column twice", "phone,city,City\n+14155550150,a,b\n", "text/csv", "header"},
			{"bad column name", "phone,first name\n+14155550150,Ada\n", "text/csv", "header"},
			{"empty file", "", "text/csv", "body"},
			{"not csv", "phone\n+1415\"5550150\n", "text/csv", "body"},
			{"unclosed quote", "phone,name\n+14155550150,\"Ada\n", "text/csv", "body"},
			{"json", `{"phone": "+14155550150"}`, "application/json", "Content-Type"},
		} {
			r := s.do(t, "POST", "/v1/contacts/import", key, tc.body, "Content-Type", tc.ctype)
			ctWantErr(t, tc.what, r, 400, "VALIDATION_ERROR", tc.field)
		}
		if r := s.do(t, "GET", "/v1/contacts?phone=%2B14155550150", key, nil); len(r.List()) != 0 {
			t.Fatalf("a refused import created contacts: %s", r.Raw)
		}
		// Over 10 MiB: 413.
		big := "phone,bio\n" + strings.Repeat("+14155550151,"+strings.Repeat("b", 400)+"\n", 26000)
		ctWantErr(t, "over 10 MiB", s.do(t, "POST", "/v1/contacts/import", key, big, "Content-Type", "text/csv"), 413, "PAYLOAD_TOO_LARGE", "")
	})
}
