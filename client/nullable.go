package client

import (
	"encoding/json"
	"fmt"
)

// Nullable is a request field that can be left out, set to null, or set to
// a value: the three things a PATCH body can say about a property. The zero
// Nullable is left out; Null removes the property's value (a phone's daily
// limit, a contact's name); Value sets it.
//
//	client.UpdatePhoneParams{DailyLimit: client.Null[int](), RateLimit: client.Value(30)}
type Nullable[T any] struct {
	value T
	state nullableState
}

type nullableState uint8

const (
	unset nullableState = iota
	null
	set
)

// Value returns a Nullable set to v.
func Value[T any](v T) Nullable[T] { return Nullable[T]{value: v, state: set} }

// Null returns a Nullable set to null.
func Null[T any]() Nullable[T] { return Nullable[T]{state: null} }

// Get returns the value and true when n is set to a value.
func (n Nullable[T]) Get() (T, bool) { return n.value, n.state == set }

// IsNull reports whether n is set to null.
func (n Nullable[T]) IsNull() bool { return n.state == null }

// IsZero reports whether n is left out; encoding/json's omitzero leaves such
// a field out of the body.
func (n Nullable[T]) IsZero() bool { return n.state == unset }

// MarshalJSON writes null or the value.
func (n Nullable[T]) MarshalJSON() ([]byte, error) {
	if n.state != set {
		return []byte("null"), nil
	}
	return json.Marshal(n.value)
}

// String shows the state, for debugging.
func (n Nullable[T]) String() string {
	switch n.state {
	case null:
		return "null"
	case set:
		return fmt.Sprint(n.value)
	}
	return "(unset)"
}
