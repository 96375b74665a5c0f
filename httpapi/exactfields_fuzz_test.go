package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzExactFields compares exactFields, which walks the raw JSON with a
// scanner of its own, with the json.Decoder walk it replaced: for every
// body that decodes, both must reject the same unknown field, or none.
func FuzzExactFields(f *testing.F) {
	for _, s := range []string{
		`{"to":"+15005550000","body":"hi","channel":"auto"}`,
		`{"to":"+1","data":{"a":"b","c":{"d":[1,2]}},"template":"t"}`,
		`{"To":"+1"}`, `{"to":"a\"b","x":1}`, `{"t\u006f":"+1"}`, "{\"\xff\":1}",
		`{"nested":{"deeper":[1,2,{"x":null}]},"to":"x"}`, ` { "to" : "a" , "body" : "b" } `,
		`[{"name":"a"},{"nmae":"b"}]`, `{"a":[],"b":{},"c":-1.5e3,"d":true,"e":null}`, `"str"`, `12`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, v := range []any{&sendRequest{}, &[]struct {
			Name string `json:"name"`
		}{}, &map[string]sendRequest{}} {
			if json.Unmarshal(raw, v) != nil {
				continue // exactFields only sees bodies that decoded
			}
			typ := reflect.TypeOf(v)
			got, want := exactFields(raw, typ), exactFieldsRef(raw, typ)
			if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
				t.Fatalf("exactFields(%q, %v) = %v, the json.Decoder walk says %v", raw, typ, got, want)
			}
		}
	})
}

// exactFieldsRef is the json.Decoder walk that exactFields replaced, kept
// as the reference the fuzz test compares it with.
func exactFieldsRef(raw []byte, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array:
	default:
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	switch tok {
	case json.Delim('['):
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil
		}
		for dec.More() {
			var elem json.RawMessage
			if dec.Decode(&elem) != nil {
				return nil
			}
			if err := exactFieldsRef(elem, t.Elem()); err != nil {
				return err
			}
		}
	case json.Delim('{'):
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = map[string]reflect.Type{}
			jsonFields(t, fields)
		} else if t.Kind() != reflect.Map {
			return nil
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil
			}
			key, _ := tok.(string)
			var val json.RawMessage
			if dec.Decode(&val) != nil {
				return nil
			}
			var elem reflect.Type
			if fields == nil {
				elem = t.Elem()
			} else if elem = fields[key]; elem == nil {
				return unknownField(key)
			}
			if err := exactFieldsRef(val, elem); err != nil {
				return err
			}
		}
	}
	return nil
}
