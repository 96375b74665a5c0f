// Package client is the Go client of the Switchboard API: one method per
// route, typed requests and answers, typed errors, the retries the API asks
// for, pagination as iterators, and the verification of webhook deliveries.
//
// It is a Go module of its own (github.com/switchboard/switchboard/client)
// that uses only the standard library, so a program that sends messages
// requires nothing else: none of the server's dependencies, nor its Go
// version. It is not a client of the device
// protocol under /api/mobile/v1, which belongs to the Android app
// (switchboard phone-agent speaks it). docs/client.md describes the package
// and the decisions it makes where the API leaves a choice.
//
//	c, err := client.New("http://127.0.0.1:8080", os.Getenv("SWITCHBOARD_KEY"))
//	if err != nil {
//		return err
//	}
//	res, err := c.SendMessage(ctx, client.SendParams{To: "+15005550000", Body: "Your order has shipped"})
//	switch {
//	case errors.Is(err, client.CodeRecipientOptedOut):
//		// the recipient sent STOP: do not write again
//	case err != nil:
//		return err
//	}
//	fmt.Println(res.MessageID, res.Status) // 01J... queued
//
// # Errors
//
// An error answer is an *Error with the HTTP status, the stable Code, the
// Message, the Details (the field at fault, the existing resource) and the
// request id. Every Code is also an error value: errors.Is(err,
// client.CodeNotFound) matches any *Error with that code. Transport
// failures and a canceled context come back as they are.
//
// # Retries
//
// Calls retry as the API asks of clients (DefaultRetryPolicy): a 429
// after its Retry-After; a 500 after 1, 2 and 4 seconds; a 503 after 2, 4,
// 8 and 16 seconds (each at least its Retry-After); never another 4xx; and
// never more than 30 seconds of waits in all (RetryPolicy.WaitBudget), so
// a NO_PHONE_AVAILABLE that asks to wait a minute or until midnight comes
// back at once, with Error.RetryAfter set. A send is retried only with an
// Idempotency-Key, and SendMessage always sets one (generating it when
// SendParams has none), so a retried send can never send twice. A wait
// that would outlast the context's deadline is not started: the call
// returns the last answer's error instead. WithRetryPolicy and WithClock
// replace the policy and the clock (tests use them to run retries without
// waiting).
//
// # Pagination
//
// List methods return an iter.Seq2 that fetches page after page, following
// the Link header, as the loop consumes them; break out of the loop to stop.
//
// # Webhooks
//
// VerifySignature checks the X-Service-Signature of a delivery;
// WebhookVerifier checks the Standard Webhooks headers with a timestamp
// tolerance (replay protection) and ReadEvent reads, verifies and parses a
// delivery into an Event.
package client
