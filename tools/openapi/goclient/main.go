// Command goclient uses the Go client that oapi-codegen generates from the
// OpenAPI document the server serves (into sbclient/, not committed) against
// a running server: a send, a template send with typed variables, a list
// followed page by page, typed errors, a failed message's error code and a
// PATCH that sends null. It exits non-zero, saying why, at the first answer
// that is not what the document and the README promise.
//
// TestOpenAPITools (cmd/switchboard) generates the client, builds this
// program and runs it with SWITCHBOARD_URL and SWITCHBOARD_KEY (a test key).
package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/oapi-codegen/nullable"

	"github.com/switchboard/switchboard/tools/openapi/goclient/sbclient"
)

func main() {
	if err := run(context.Background(), os.Getenv("SWITCHBOARD_URL"), os.Getenv("SWITCHBOARD_KEY")); err != nil {
		fmt.Fprintln(os.Stderr, "goclient:", err)
		os.Exit(1)
	}
	fmt.Println("goclient: every check passed")
}

func run(ctx context.Context, server, key string) error {
	if server == "" || key == "" {
		return fmt.Errorf("set SWITCHBOARD_URL and SWITCHBOARD_KEY")
	}
	c, err := sbclient.NewClientWithResponses(server, sbclient.WithRequestEditorFn(func(ctx context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+key)
		return nil
	}))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	// A send: 202 with the accepted message; auto resolves to chat.
	to := "+15005550000"
	sent, err := c.SendMessageWithResponse(ctx, &sbclient.SendMessageParams{IdempotencyKey: ptr("goclient-1")},
		sbclient.SendMessageRequest{To: to, Body: ptr("hello from the generated client")})
	if err != nil {
		return fmt.Errorf("sendMessage: %w", err)
	}
	if sent.JSON202 == nil {
		return unexpected("sendMessage", sent.HTTPResponse, sent.Body)
	}
	if d := sent.JSON202.Data; d.Status != sbclient.SendAcceptedStatusQueued || d.Channel != sbclient.ChannelChat || d.To != to || d.MessageId == "" {
		return fmt.Errorf("sendMessage: accepted %+v, want queued on chat to %s", d, to)
	}
	if sent.HTTPResponse.Header.Get("X-Request-Id") == "" {
		return fmt.Errorf("sendMessage: no X-Request-Id")
	}
	ids := []string{sent.JSON202.Data.MessageId}

	// A template send whose variables are a string, a number and a boolean.
	tpl, err := c.CreateTemplateWithResponse(ctx, sbclient.CreateTemplateRequest{Name: "goclient", Body: "Hi {{name}}, order {{order}} ({{vip}})"})
	if err != nil {
		return fmt.Errorf("createTemplate: %w", err)
	}
	if tpl.JSON201 == nil || !slices.Equal(tpl.JSON201.Data.Variables, []string{"name", "order", "vip"}) {
		return unexpected("createTemplate", tpl.HTTPResponse, tpl.Body)
	}
	var name, order, vip sbclient.TemplateValue
	if err := name.FromTemplateValue0("Ada"); err != nil {
		return err
	}
	if err := order.FromTemplateValue1(1234); err != nil {
		return err
	}
	if err := vip.FromTemplateValue2(true); err != nil {
		return err
	}
	data := sbclient.TemplateData{"name": name, "order": order, "vip": vip}
	sms := sbclient.SendChannelSms
	sent, err = c.SendMessageWithResponse(ctx, nil, sbclient.SendMessageRequest{To: to, Template: ptr("goclient"), Data: &data, Channel: &sms})
	if err != nil {
		return fmt.Errorf("sendMessage (template): %w", err)
	}
	if sent.JSON202 == nil || sent.JSON202.Data.Channel != sbclient.ChannelSms {
		return unexpected("sendMessage (template)", sent.HTTPResponse, sent.Body)
	}
	ids = append(ids, sent.JSON202.Data.MessageId)
	msg, err := c.GetMessageWithResponse(ctx, sent.JSON202.Data.MessageId)
	if err != nil {
		return fmt.Errorf("getMessage: %w", err)
	}
	if msg.JSON200 == nil || msg.JSON200.Data.Body != "Hi Ada, order 1234 (true)" || msg.JSON200.Data.Template == nil {
		return unexpected("getMessage", msg.HTTPResponse, msg.Body)
	}

	// A message whose delivery fails carries the typed error code.
	sent, err = c.SendMessageWithResponse(ctx, nil, sbclient.SendMessageRequest{To: "+15005550001", Body: ptr("this one fails")})
	if err != nil {
		return fmt.Errorf("sendMessage (failing number): %w", err)
	}
	if sent.JSON202 == nil {
		return unexpected("sendMessage (failing number)", sent.HTTPResponse, sent.Body)
	}
	failing := sent.JSON202.Data.MessageId
	ids = append(ids, failing)
	for {
		msg, err := c.GetMessageWithResponse(ctx, failing)
		if err != nil {
			return fmt.Errorf("getMessage: %w", err)
		}
		if msg.JSON200 == nil {
			return unexpected("getMessage", msg.HTTPResponse, msg.Body)
		}
		if m := msg.JSON200.Data; m.Status == sbclient.MessageStatusFailed {
			if m.ErrorCode == nil || *m.ErrorCode != sbclient.MessageErrorCodeDELIVERYFAILED || m.FailureReason == nil || m.FailedAt == nil {
				return fmt.Errorf("getMessage: failed message %+v, want error_code DELIVERY_FAILED with failure_reason and failed_at", m)
			}
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("getMessage: %s never failed", failing)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The list, followed one page at a time through the Link header:
	// every message, newest first.
	var listed []string
	params := &sbclient.ListMessagesParams{Limit: ptr(1), Direction: ptr(sbclient.Outbound)}
	for pages := 0; ; pages++ {
		if pages > len(ids) {
			return fmt.Errorf("listMessages: more pages than messages")
		}
		page, err := c.ListMessagesWithResponse(ctx, params)
		if err != nil {
			return fmt.Errorf("listMessages: %w", err)
		}
		if page.JSON200 == nil || len(page.JSON200.Data) > 1 {
			return unexpected("listMessages", page.HTTPResponse, page.Body)
		}
		for _, m := range page.JSON200.Data {
			listed = append(listed, m.Id)
		}
		after, err := nextAfter(page.HTTPResponse.Header.Get("Link"))
		if err != nil {
			return fmt.Errorf("listMessages: %w", err)
		}
		if after == "" {
			break
		}
		params.After = &after
	}
	slices.Reverse(ids)
	if !slices.Equal(listed, ids) {
		return fmt.Errorf("listMessages: paged through %v, want %v (newest first)", listed, ids)
	}

	// Typed errors: the code is the document's ErrorCode enum.
	bad, err := c.SendMessageWithResponse(ctx, nil, sbclient.SendMessageRequest{To: "555-0100", Body: ptr("x")})
	if err != nil {
		return fmt.Errorf("sendMessage (bad number): %w", err)
	}
	if bad.JSON400 == nil || bad.JSON400.Code != sbclient.ErrorCodeINVALIDPHONENUMBER {
		return unexpected("sendMessage (bad number)", bad.HTTPResponse, bad.Body)
	}
	missing, err := c.GetMessageWithResponse(ctx, "01JD5Z8Q4K7V3N2M1X0W9Y8T7R")
	if err != nil {
		return fmt.Errorf("getMessage (unknown): %w", err)
	}
	if missing.JSON404 == nil || missing.JSON404.Code != sbclient.ErrorCodeNOTFOUND {
		return unexpected("getMessage (unknown)", missing.HTTPResponse, missing.Body)
	}
	dup, err := c.CreateContactWithResponse(ctx, sbclient.ContactCreate{Phone: "+15005550100", Name: ptr("Ada")})
	if err != nil {
		return fmt.Errorf("createContact: %w", err)
	}
	if dup.JSON201 == nil {
		return unexpected("createContact", dup.HTTPResponse, dup.Body)
	}
	contact := dup.JSON201.Data
	dup, err = c.CreateContactWithResponse(ctx, sbclient.ContactCreate{Phone: "+15005550100"})
	if err != nil {
		return fmt.Errorf("createContact (duplicate): %w", err)
	}
	if dup.JSON409 == nil || dup.JSON409.Code != sbclient.DuplicateContactErrorCodeDUPLICATECONTACT || dup.JSON409.Details.ExistingId != contact.Id {
		return unexpected("createContact (duplicate)", dup.HTTPResponse, dup.Body)
	}

	// PATCH: a property left out keeps its value, null removes it.
	upd, err := c.UpdateContactWithResponse(ctx, contact.Id, sbclient.ContactUpdate{Phone: ptr("+15005550101")})
	if err != nil {
		return fmt.Errorf("updateContact (phone): %w", err)
	}
	if upd.JSON200 == nil || upd.JSON200.Data.Phone != "+15005550101" || upd.JSON200.Data.Name == nil || *upd.JSON200.Data.Name != "Ada" {
		return unexpected("updateContact (phone only: the name must stay)", upd.HTTPResponse, upd.Body)
	}
	upd, err = c.UpdateContactWithResponse(ctx, contact.Id, sbclient.ContactUpdate{
		Name:   nullable.NewNullNullable[string](),
		Fields: nullable.NewNullableWithValue(sbclient.ContactFields{"code": "A1"}),
	})
	if err != nil {
		return fmt.Errorf("updateContact (name: null): %w", err)
	}
	if upd.JSON200 == nil || upd.JSON200.Data.Name != nil || upd.JSON200.Data.Fields["code"] != "A1" {
		return unexpected("updateContact (name: null)", upd.HTTPResponse, upd.Body)
	}
	upd, err = c.UpdateContactWithResponse(ctx, contact.Id, sbclient.ContactUpdate{Fields: nullable.NewNullNullable[sbclient.ContactFields]()})
	if err != nil {
		return fmt.Errorf("updateContact (fields: null): %w", err)
	}
	if upd.JSON200 == nil || len(upd.JSON200.Data.Fields) != 0 {
		return unexpected("updateContact (fields: null)", upd.HTTPResponse, upd.Body)
	}
	return nil
}

var linkNext = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

// nextAfter returns the after cursor of a Link header, "" when there is none.
func nextAfter(link string) (string, error) {
	if link == "" {
		return "", nil
	}
	m := linkNext.FindStringSubmatch(link)
	if m == nil {
		return "", fmt.Errorf("Link %q is not <...>; rel=\"next\"", link)
	}
	u, err := url.Parse(m[1])
	if err != nil {
		return "", err
	}
	if u.Query().Get("after") == "" {
		return "", fmt.Errorf("Link %q has no after", link)
	}
	return u.Query().Get("after"), nil
}

func unexpected(op string, res *http.Response, b []byte) error {
	status := 0
	if res != nil {
		status = res.StatusCode
	}
	return fmt.Errorf("%s: unexpected answer %d: %s", op, status, b)
}

func ptr[T any](v T) *T { return &v }
