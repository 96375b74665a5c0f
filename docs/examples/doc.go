// Package examples holds the receiver snippets that docs/webhooks.md shows:
// the doc includes each file verbatim, and the tests of cmd/switchboard
// check that and run every snippet against a real signed delivery, so that
// the documentation cannot drift from what Switchboard sends.
package examples
