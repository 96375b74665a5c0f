package main

import (
	"net/http"
	"testing"
)

func TestKeysSmoke(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := newTenant(t, db)
		r := s.do(t, "GET", "/v1/api-keys", tn.Live, nil)
		if r.Status != http.StatusOK || len(r.List()) != 2 {
			t.Fatalf("list: %d %s", r.Status, r.Raw)
		}
		r = s.do(t, "POST", "/v1/api-keys", tn.Live, map[string]any{"name": "ci", "rate_limit": 10})
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Raw)
		}
		r = s.do(t, "PUT", "/v1/api-keys", "", nil)
		if r.Status != 405 || r.Code() != "METHOD_NOT_ALLOWED" {
			t.Fatalf("405: %d %s", r.Status, r.Raw)
		}
	})
}
