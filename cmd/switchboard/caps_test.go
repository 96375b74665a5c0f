package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestObjectCaps: a tenant's environment holds at most the plan's
// max_contacts contacts, max_templates templates and max_open_campaigns
// draft or running campaigns; creating one more is 400 VALIDATION_ERROR, as
// for keys and webhooks, and deleting (or finishing a campaign) makes room
// The caps are lowered with --plans.
func TestObjectCaps(t *testing.T) {
	t.Parallel()
	runShared(t, []string{"--plans", tempPlansFile(t, `{"scale": {"max_contacts": 3, "max_templates": 2, "max_open_campaigns": 2}}`)}, []sharedCase{
		{"Contacts", testCapContacts},
		{"ContactImport", testCapContactImport},
		{"Templates", testCapTemplates},
		{"Campaigns", testCapCampaigns},
	})
}

func testCapContacts(t *testing.T, s *server, db string) {
	tn := ctTenant(t, db)
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, ctCreate(t, s, tn.Live, map[string]any{"phone": fmt.Sprintf("+1415555010%d", i)})["id"].(string))
	}
	over := s.do(t, "POST", "/v1/contacts", tn.Live, map[string]any{"phone": "+14155550109"})
	ctWantErr(t, "a contact over the cap", over, http.StatusBadRequest, "VALIDATION_ERROR", "phone")
	if msg, _ := over.Body["error"].(string); !strings.Contains(msg, "3") {
		t.Errorf("the refusal does not name the cap: %q", msg)
	}
	// A duplicate is still told as such.
	ctWantErr(t, "a duplicate at the cap", s.do(t, "POST", "/v1/contacts", tn.Live, map[string]any{"phone": "+14155550100"}),
		http.StatusConflict, "DUPLICATE_CONTACT", "")
	// The test environment has its own.
	for i := 0; i < 3; i++ {
		ctCreate(t, s, tn.Test, map[string]any{"phone": fmt.Sprintf("+1415555010%d", i)})
	}
	// Deleting one makes room for one.
	if r := s.do(t, "DELETE", "/v1/contacts/"+ids[0], tn.Live, nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Raw)
	}
	ctCreate(t, s, tn.Live, map[string]any{"phone": "+14155550109"})
	ctWantErr(t, "a contact over the cap again", s.do(t, "POST", "/v1/contacts", tn.Live, map[string]any{"phone": "+14155550108"}),
		http.StatusBadRequest, "VALIDATION_ERROR", "phone")
}

func testCapContactImport(t *testing.T, s *server, db string) {
	tn := ctTenant(t, db)
	existing := ctCreate(t, s, tn.Live, map[string]any{"phone": "+14155550200"})["id"].(string)
	// Room for 2: the duplicate takes none, the third new number and its
	// repeat are refused, and a later import finds the cap reached.
	created, dups, invalid, rows := ctImport(t, s, tn.Live, "phone\n+14155550200\n+14155550201\n+14155550202\n+14155550203\n+14155550203\n")
	if created != 2 || dups != 1 || invalid != 2 {
		t.Fatalf("import at the cap: created %d, duplicates %d, invalid %d; want 2, 1, 2 (%+v)", created, dups, invalid, rows)
	}
	if rows[0].Status != "duplicate" || rows[0].ExistingID != existing || rows[1].Status != "created" || rows[2].Status != "created" {
		t.Errorf("rows %+v", rows)
	}
	for _, r := range rows[3:] {
		if r.Status != "invalid" || !strings.Contains(r.Error, "3") {
			t.Errorf("row %d over the cap: %+v, want invalid naming the cap", r.Row, r)
		}
	}
	if created, _, invalid, _ := ctImport(t, s, tn.Live, "phone\n+14155550204\n"); created != 0 || invalid != 1 {
		t.Errorf("import with the cap reached: created %d, invalid %d", created, invalid)
	}
	if n := len(s.do(t, "GET", "/v1/contacts", tn.Live, nil).List()); n != 3 {
		t.Errorf("%d contacts, want the cap of 3", n)
	}
}

func testCapTemplates(t *testing.T, s *server, db string) {
	tn := ctTenant(t, db)
	first := msgCreateTemplate(t, s, tn.Live, "one", "Hi {{name}}")["id"].(string)
	msgCreateTemplate(t, s, tn.Live, "two", "Hi")
	r := s.do(t, "POST", "/v1/templates", tn.Live, map[string]any{"name": "three", "body": "Hi"})
	ctWantErr(t, "a template over the cap", r, http.StatusBadRequest, "VALIDATION_ERROR", "name")
	msgCreateTemplate(t, s, tn.Test, "three", "Hi") // the test environment has its own
	if r := s.do(t, "DELETE", "/v1/templates/"+first, tn.Live, nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Raw)
	}
	msgCreateTemplate(t, s, tn.Live, "three", "Hi")
}

func testCapCampaigns(t *testing.T, s *server, db string) {
	tn := ctTenant(t, db)
	body := func(name string) map[string]any {
		return map[string]any{"name": name, "body": "Sale", "to": []string{"+15005550000"}}
	}
	a := cmpCreate(t, s, tn.Live, body("a"))["id"].(string)
	b := cmpCreate(t, s, tn.Live, body("b"))["id"].(string)
	ctWantErr(t, "a campaign over the cap", s.do(t, "POST", "/v1/campaigns", tn.Live, body("c")), http.StatusBadRequest, "VALIDATION_ERROR", "name")
	cmpCreate(t, s, tn.Test, body("c")) // the test environment has its own
	// A running campaign is open too; a canceled or completed one is not.
	cmpLaunch(t, s, tn.Live, a)
	ctWantErr(t, "a campaign over the cap, one running", s.do(t, "POST", "/v1/campaigns", tn.Live, body("c")), http.StatusBadRequest, "VALIDATION_ERROR", "name")
	if r := s.do(t, "POST", "/v1/campaigns/"+b+"/cancel", tn.Live, nil); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Raw)
	}
	cmpCreate(t, s, tn.Live, body("c"))
	cmpAwait(t, s, tn.Live, a, "the campaign to complete", func(c map[string]any) bool { return c["status"] == "completed" })
	cmpCreate(t, s, tn.Live, body("d"))
	ctWantErr(t, "a campaign over the cap at the end", s.do(t, "POST", "/v1/campaigns", tn.Live, body("e")), http.StatusBadRequest, "VALIDATION_ERROR", "name")
}
