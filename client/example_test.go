package client_test

// The examples run against the real server that TestMain starts, with the
// test key of a tenant of their own in SWITCHBOARD_KEY (and its live key in
// SWITCHBOARD_LIVE_KEY): `go test` checks their output.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/switchboard/switchboard/client"
)

// The quickstart: a client, a send, and the message as it stands.
func Example() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("SWITCHBOARD_URL"), os.Getenv("SWITCHBOARD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.SendMessage(ctx, client.SendParams{To: "+15005550000", Body: "Your order has shipped", Channel: client.ChannelSMS})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Channel)

	m, err := c.GetMessage(ctx, res.MessageID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Direction, m.Body)
	// Output:
	// queued sms
	// outbound Your order has shipped
}

// A send with your own Idempotency-Key can be repeated safely, by this
// process or another: the repeat sends nothing and answers the same.
func ExampleClient_SendMessage() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("SWITCHBOARD_URL"), os.Getenv("SWITCHBOARD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	p := client.SendParams{
		To:             "+15005550000",
		Template:       "shipped",
		Data:           map[string]any{"name": "Ada", "order": 1234},
		IdempotencyKey: "order-1234-shipped",
	}
	if _, err := c.CreateTemplate(ctx, client.CreateTemplateParams{Name: "shipped", Body: "Hi {{ name }}, order {{order}} has shipped"}); err != nil &&
		!errors.Is(err, client.CodeDuplicateTemplate) {
		log.Fatal(err)
	}
	first, err := c.SendMessage(ctx, p)
	if err != nil {
		log.Fatal(err)
	}
	again, err := c.SendMessage(ctx, p)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(again.Replayed, again.MessageID == first.MessageID)
	// Output: true true
}

// Errors carry a stable code: match it with errors.Is, and read the
// details from the *Error.
func ExampleError() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("SWITCHBOARD_URL"), os.Getenv("SWITCHBOARD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.SendMessage(ctx, client.SendParams{To: "+1 (500) 555-0000", Body: "hi"})
	fmt.Println(errors.Is(err, client.CodeInvalidPhoneNumber))

	_, err = c.SendMessage(ctx, client.SendParams{To: "+15005550000"})
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.StatusCode, e.Code, e.Details.Field)
	}
	// Output:
	// true
	// 400 VALIDATION_ERROR body
}

// A list is an iterator: it fetches the next page when the loop gets there.
func ExampleClient_ListMessages() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("SWITCHBOARD_URL"), os.Getenv("SWITCHBOARD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	for _, text := range []string{"Thanks", "See you"} {
		if _, err := c.SimulateInboundMessage(ctx, client.InboundParams{From: "+15005550008", Body: text}); err != nil {
			log.Fatal(err)
		}
	}
	n := 0
	for m, err := range c.ListMessages(ctx, &client.ListMessagesParams{Direction: client.Inbound, ListParams: client.ListParams{Limit: 1}}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.From, m.Body)
		if n++; n == 2 {
			break // the newest two are enough
		}
	}
	// Output:
	// +15005550008 See you
	// +15005550008 Thanks
}

// Client.UpdatePhone takes Nullable fields: left out, a value, or null to
// remove the limit.
func ExampleClient_UpdatePhone() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("SWITCHBOARD_URL"), os.Getenv("SWITCHBOARD_LIVE_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	phone, err := c.CreatePhone(ctx, client.CreatePhoneParams{Number: "+15551234567", DailyLimit: client.Value(500)})
	if err != nil {
		log.Fatal(err)
	}
	defer c.DeletePhone(ctx, phone.ID)
	fmt.Println(phone.Kind, phone.Status, *phone.DailyLimit, len(phone.Pairing.Code))

	updated, err := c.UpdatePhone(ctx, phone.ID, client.UpdatePhoneParams{DailyLimit: client.Null[int](), RateLimit: client.Value(20)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(updated.DailyLimit == nil, *updated.RateLimit)
	// Output:
	// android offline 500 8
	// true 20
}

// A webhook endpoint that verifies each delivery (Standard Webhooks
// signature and timestamp) before it trusts it.
func ExampleWebhookVerifier_ReadEvent() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("SWITCHBOARD_URL"), os.Getenv("SWITCHBOARD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	const secret = "a-long-random-secret-you-keep"
	verifier := &client.WebhookVerifier{Secret: secret}
	events := make(chan *client.Event, 16)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := verifier.ReadEvent(r)
		if err != nil {
			http.Error(w, "invalid delivery", http.StatusUnauthorized)
			return
		}
		events <- ev // deduplicate on ev.DeliveryID in a real endpoint
		w.WriteHeader(http.StatusNoContent)
	}))
	defer endpoint.Close()

	hook, err := c.CreateWebhook(ctx, client.CreateWebhookParams{URL: endpoint.URL, Secret: secret,
		Events: []client.EventType{client.EventMessageFailed}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.DeleteWebhook(ctx, hook.ID)

	res, err := c.SendMessage(ctx, client.SendParams{To: "+15005550001", Body: "This one fails"})
	if err != nil {
		log.Fatal(err)
	}
	for {
		select {
		case ev := <-events:
			if ev.MessageID != res.MessageID {
				continue
			}
			fmt.Println(ev.Type, ev.ErrorCode, ev.FailureReason)
		case <-time.After(30 * time.Second):
			fmt.Println("no delivery")
		}
		break
	}
	// Output: message.failed DELIVERY_FAILED simulated carrier rejection
}

// VerifySignature checks the X-Service-Signature header against the exact
// bytes received, before they are parsed.
func ExampleVerifySignature() {
	const secret = "a-long-random-secret-you-keep"
	body := []byte(`{"event":"message.delivered","message_id":"01JJ8Z5N3T9V0Q6W2B4XKD7M1C"}`)
	header := "sha256=16c354519d946ed9225aff4da1e4b61bbe3e74057f3cd44caed443077d52618a"
	fmt.Println(client.VerifySignature(secret, body, header))

	tampered := []byte(`{"event":"message.delivered","message_id":"01JJ8Z5N3T9V0Q6W2B4XKD7M1D"}`)
	fmt.Println(client.VerifySignature(secret, tampered, header))
	// Output:
	// <nil>
	// switchboard: webhook signature does not match
}
