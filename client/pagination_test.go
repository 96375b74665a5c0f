package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/client"
)

// queries returns the query strings of the GET requests to path.
func (r *routeRecorder) queries(path string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		if c.method == http.MethodGet && c.path == path {
			out = append(out, c.query)
		}
	}
	return out
}

// TestPaginationAcrossPages lists every kind of list of the real server
// page by page, following the Link header, newest first.
func TestPaginationAcrossPages(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	tn := newTenant(t)
	rec := &routeRecorder{next: http.DefaultTransport}
	c := newClient(t, tn.Test, client.WithHTTPClient(&http.Client{Transport: rec}))

	sink := newHookSink(t, http.StatusNoContent)
	wh := must(c.CreateWebhook(ctx, client.CreateWebhookParams{URL: sink.srv.URL, Events: []client.EventType{client.EventMessageDelivered},
		Secret: "pagination-secret-0123"}))(t)
	var sent []string
	for i := range 7 {
		res := must(c.SendMessage(ctx, client.SendParams{To: "+15005550000", Body: fmt.Sprintf("message %d", i)}))(t)
		sent = append(sent, res.MessageID)
	}
	slices.Reverse(sent) // newest first

	t.Run("messages", func(t *testing.T) {
		var got []string
		for m, err := range c.ListMessages(ctx, &client.ListMessagesParams{ListParams: client.ListParams{Limit: 3}}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m.ID)
		}
		if !slices.Equal(got, sent) {
			t.Fatalf("listed %v, want %v", got, sent)
		}
		want := []string{"limit=3", "after=" + sent[2] + "&limit=3", "after=" + sent[5] + "&limit=3"}
		if q := rec.queries("/v1/messages"); !slices.Equal(q, want) {
			t.Fatalf("pages %v, want %v", q, want)
		}
	})

	t.Run("stops fetching when the loop stops", func(t *testing.T) {
		before := len(rec.queries("/v1/messages"))
		var got []string
		for m, err := range c.ListMessages(ctx, &client.ListMessagesParams{ListParams: client.ListParams{Limit: 3}}) {
			if err != nil {
				t.Fatal(err)
			}
			if got = append(got, m.ID); len(got) == 4 {
				break
			}
		}
		if !slices.Equal(got, sent[:4]) || len(rec.queries("/v1/messages"))-before != 2 {
			t.Fatalf("listed %v with %d pages", got, len(rec.queries("/v1/messages"))-before)
		}
	})

	t.Run("after a cursor, with filters kept", func(t *testing.T) {
		got := collect(t, c.ListMessages(ctx, &client.ListMessagesParams{To: "+15005550000", Direction: client.Outbound,
			ListParams: client.ListParams{Limit: 2, After: sent[1]}}))
		if len(got) != 5 || got[0].ID != sent[2] || got[4].ID != sent[6] {
			t.Fatalf("listed %s", jsonString(got))
		}
		q := rec.queries("/v1/messages")
		if last := q[len(q)-1]; last != "after="+sent[5]+"&direction=outbound&limit=2&to=%2B15005550000" {
			t.Fatalf("last page %q", last)
		}
	})

	t.Run("templates contacts campaigns deliveries", func(t *testing.T) {
		var tpls, contacts, campaigns []string
		for i := range 5 {
			tpls = append(tpls, must(c.CreateTemplate(ctx, client.CreateTemplateParams{Name: fmt.Sprintf("t%d", i), Body: "hi"}))(t).ID)
			contacts = append(contacts, must(c.CreateContact(ctx, client.CreateContactParams{Phone: fmt.Sprintf("+1415555010%d", i)}))(t).ID)
			campaigns = append(campaigns, must(c.CreateCampaign(ctx, client.CreateCampaignParams{Name: fmt.Sprintf("c%d", i), Body: "hi", AllContacts: true}))(t).ID)
		}
		slices.Reverse(tpls)
		slices.Reverse(contacts)
		slices.Reverse(campaigns)
		ids := func(seq func(func(string, error) bool)) []string {
			var out []string
			for id, err := range seq {
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, id)
			}
			return out
		}
		p := &client.ListParams{Limit: 2}
		if got := ids(mapSeq(c.ListTemplates(ctx, p), func(x *client.Template) string { return x.ID })); !slices.Equal(got, tpls) {
			t.Fatalf("templates %v, want %v", got, tpls)
		}
		if got := ids(mapSeq(c.ListContacts(ctx, &client.ListContactsParams{ListParams: *p}), func(x *client.Contact) string { return x.ID })); !slices.Equal(got, contacts) {
			t.Fatalf("contacts %v, want %v", got, contacts)
		}
		if got := ids(mapSeq(c.ListCampaigns(ctx, p), func(x *client.Campaign) string { return x.ID })); !slices.Equal(got, campaigns) {
			t.Fatalf("campaigns %v, want %v", got, campaigns)
		}
		for _, path := range []string{"/v1/templates", "/v1/contacts", "/v1/campaigns"} {
			if n := len(rec.queries(path)); n != 3 {
				t.Fatalf("%s: %d pages, want 3", path, n)
			}
		}
		var delivered []string
		waitFor(t, 30*time.Second, "seven deliveries", func() (bool, error) {
			delivered = nil
			for d, err := range c.ListWebhookDeliveries(ctx, wh.ID, p) {
				if err != nil {
					return false, err
				}
				delivered = append(delivered, d.MessageID)
			}
			return len(delivered) == 7, nil
		})
		slices.Sort(delivered)
		want := slices.Sorted(slices.Values(sent))
		if !slices.Equal(delivered, want) {
			t.Fatalf("deliveries of %v, want %v", delivered, want)
		}
	})
}

func mapSeq[T any](seq func(func(*T, error) bool), f func(*T) string) func(func(string, error) bool) {
	return func(yield func(string, error) bool) {
		for it, err := range seq {
			var s string
			if err == nil {
				s = f(it)
			}
			if !yield(s, err) {
				return
			}
		}
	}
}

// TestPaginationUnderAPrefix: behind a proxy that serves the API under a
// path prefix and passes the server's Link through, the next pages stay
// under the prefix.
func TestPaginationUnderAPrefix(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	tn := newTenant(t)
	target, _ := url.Parse(testServer.URL)
	proxy := httptest.NewServer(http.StripPrefix("/switchboard", httputil.NewSingleHostReverseProxy(target)))
	defer proxy.Close()
	c := newClient(t, tn.Test)
	for i := range 5 {
		must(c.CreateTemplate(ctx, client.CreateTemplateParams{Name: fmt.Sprintf("t%d", i), Body: "hi"}))(t)
	}
	pc := must(client.New(proxy.URL+"/switchboard/", tn.Test))(t)
	if got := collect(t, pc.ListTemplates(ctx, &client.ListParams{Limit: 2})); len(got) != 5 || got[0].Name != "t4" || got[4].Name != "t0" {
		t.Fatalf("templates through the proxy: %s", jsonString(got))
	}
}

// TestPaginationLinks: the Link header is read as RFC 8288 says, and a
// next page on another origin (which would get the key) is refused.
func TestPaginationLinks(t *testing.T) {
	t.Parallel()
	var link string
	var pages []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pages = append(pages, r.URL.RequestURI())
		if r.URL.Query().Get("after") == "" {
			w.Header().Set("Link", link)
		}
		io.WriteString(w, `{"data":[{"id":"`+fmt.Sprint(len(pages))+`","name":"x"}]}`)
	}))
	defer srv.Close()
	c := must(client.New(srv.URL, scriptKey))(t)
	for _, tc := range []struct {
		link    string
		pages   []string
		wantErr string
	}{
		{`</v1/templates?after=1&limit=1>; rel="next"`, []string{"/v1/templates", "/v1/templates?after=1&limit=1"}, ""},
		{`</v1/templates?after=1&limit=1>; rel="prev first", </v1/templates?after=9&limit=1>; rel="next"`, []string{"/v1/templates", "/v1/templates?after=9&limit=1"}, ""},
		{`<?after=2>; REL=next`, []string{"/v1/templates", "/v1/templates?after=2"}, ""},
		{`</v1/templates?after=1>; rel="prev"`, []string{"/v1/templates"}, ""},
		{`<https://elsewhere.example/v1/templates?after=1>; rel="next"`, []string{"/v1/templates"}, "another origin"},
		{`</v1/templates>; rel="next"`, []string{"/v1/templates"}, "the page itself"},
	} {
		link, pages = tc.link, nil
		got, err := collectErr(c.ListTemplates(context.Background(), nil))
		if tc.wantErr == "" && (err != nil || len(got) != len(tc.pages)) || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Link %s: %d items, err %v", tc.link, len(got), err)
		}
		if !slices.Equal(pages, tc.pages) {
			t.Errorf("Link %s: fetched %v, want %v", tc.link, pages, tc.pages)
		}
	}
}
