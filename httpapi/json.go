package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	sb "github.com/switchboard/switchboard"
)

// MaxBodyBytes is the largest request body accepted (contract section 1).
const MaxBodyBytes = 1 << 20

type dataBody struct {
	Data any     `json:"data"`
	Code sb.Code `json:"code,omitempty"`
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeJSON writes v with status. Encoding goes to a buffer first so that a
// value that cannot be encoded turns into a 500, not half a body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		buf.Reset()
		status = http.StatusInternalServerError
		fmt.Fprintf(buf, `{"error":"An unexpected error occurred.","code":%q}`+"\n", sb.CodeInternal)
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// writeData writes the success envelope.
func writeData(w http.ResponseWriter, status int, data any) {
	writeJSON(w, status, dataBody{Data: data})
}

// decode reads a JSON object from the body into v, strictly: unknown fields,
// wrong types, trailing data and bodies over MaxBodyBytes are errors that
// name the field when there is one.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeReadError(err)
	}
	return decodeBytes(raw, v)
}

func decodeReadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return sb.Errorf(sb.CodePayloadTooLarge, "The request body is larger than %d bytes.", MaxBodyBytes)
	}
	return sb.Invalid("body", "The request body could not be read.")
}

// decodeBytes is decode without the reading; the fuzz tests drive it.
func decodeBytes(raw []byte, v any) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return sb.Invalid("body", "A JSON object body is required.")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return sb.Invalid("body", "The request body must hold exactly one JSON object.")
	}
	return exactFields(raw, reflect.TypeOf(v))
}

var jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// exactFields rejects an object key that is not exactly the name of a field
// of t. encoding/json matches names case-insensitively ("NAME" fills name),
// but the documented bodies have additionalProperties: false. raw is one
// valid JSON value that already decoded into t.
func exactFields(raw []byte, t reflect.Type) error {
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
			if err := exactFields(elem, t.Elem()); err != nil {
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
			if err := exactFields(val, elem); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields adds the JSON names of the fields of struct type t to fields,
// with the same tag rules as encoding/json (embedded structs are flattened).
func jsonFields(t reflect.Type, fields map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				jsonFields(ft, fields)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
}

// unknownField is the error for an object key that names no field.
func unknownField(name string) error {
	if name == "" {
		return sb.Invalid("body", "Unknown field \"\".")
	}
	return sb.Invalid(name, "Unknown field %q.", name)
}

func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return sb.Invalid("body", "The request body is not valid JSON (error at byte %d).", syn.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return sb.Invalid("body", "The request body is not valid JSON (it ends early).")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return sb.Invalid("body", "The request body must be a JSON object.")
		}
		return sb.Invalid(typ.Field, "%s must be of type %s.", typ.Field, jsonType(typ.Type.Kind().String()))
	}
	// encoding/json has no typed error for an unknown field; its text is
	// `json: unknown field "name"`, quoted with %q, so that strconv.Unquote
	// recovers the name exactly (trimming quotes does not: `{"a\"":1}`).
	if quoted, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if name, err := strconv.Unquote(quoted); err == nil {
			return unknownField(name)
		}
		return sb.Invalid("body", "The request body has an unknown field.")
	}
	return sb.Invalid("body", "The request body is not valid JSON.")
}

func jsonType(kind string) string {
	switch kind {
	case "int", "int64", "int32", "uint", "uint64":
		return "integer"
	case "float64", "float32":
		return "number"
	case "ptr":
		return "object"
	case "map", "struct":
		return "object"
	case "slice":
		return "array"
	case "bool":
		return "boolean"
	}
	return kind
}
