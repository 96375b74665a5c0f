package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	sb "github.com/switchboard/switchboard"
)

// MaxBodyBytes is the largest request body accepted (docs/api.md).
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
	if err := notAForm(r, raw); err != nil {
		return err
	}
	return decodeBytes(raw, v)
}

// notAForm refuses a body sent as a form (what curl -d and an HTML form
// send) that is not JSON, with a message that says JSON is expected and
// details.field naming the Content-Type header, not a field the route may
// have. A form's Content-Type over a JSON body is read as JSON, as before.
func notAForm(r *http.Request, raw []byte) error {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if (mt != "application/x-www-form-urlencoded" && mt != "multipart/form-data") || json.Valid(raw) {
		return nil
	}
	return sb.Invalid("Content-Type", "The request body must be JSON, sent with Content-Type: application/json; this one is %s. "+
		`With curl, use --json '{"to": "+15005550000", ...}' or -H 'Content-Type: application/json' -d '{...}'.`, mt)
}

// noBody checks the body of a route that takes none: empty, or an empty
// JSON object, is fine; anything else is VALIDATION_ERROR, so that a field
// the route does not have (say a launch time) is not silently ignored.
func noBody(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeReadError(err)
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("{}")) {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err == nil {
		for k := range obj {
			return sb.Invalid(k, "Unknown field %q: this route takes no body.", k)
		}
		return nil
	}
	return sb.Invalid("body", "This route takes no body; send none (or {}).")
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
	switch i := skipSpace(raw, 0); {
	case i < len(raw) && raw[i] == '[':
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil
		}
		return eachMember(raw, i, false, func(_ string, val []byte) error { return exactFields(val, t.Elem()) })
	case i < len(raw) && raw[i] == '{':
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = structFields(t)
		} else if t.Kind() != reflect.Map {
			return nil
		}
		return eachMember(raw, i, true, func(key string, val []byte) error {
			var elem reflect.Type
			if fields == nil {
				elem = t.Elem()
			} else if elem = fields[key]; elem == nil {
				return unknownField(key)
			}
			return exactFields(val, elem)
		})
	}
	return nil
}

// eachMember calls fn with each member of the object (or element of the
// array) that starts at raw[i], which is valid JSON: the member's key (""
// in an array) and its raw value. It is a scanner, not a parser: the JSON
// has already been decoded, and this only walks it again, much faster than
// json.Decoder.Token would.
func eachMember(raw []byte, i int, object bool, fn func(key string, val []byte) error) error {
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != '}' && raw[i] != ']' {
		var key string
		if object {
			end := skipValue(raw, i)
			key = jsonKey(raw[i:end])
			i = skipSpace(raw, end)
			i = skipSpace(raw, i+1) // the colon
		}
		end := skipValue(raw, i)
		if err := fn(key, raw[i:end]); err != nil {
			return err
		}
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return nil
}

// jsonKey returns the string that the JSON string literal lit decodes to.
func jsonKey(lit []byte) string {
	if len(lit) < 2 {
		return "" // not a string: cannot happen in valid JSON
	}
	plain := true
	for _, c := range lit[1 : len(lit)-1] {
		if c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return string(lit[1 : len(lit)-1])
	}
	var key string
	json.Unmarshal(lit, &key) // escapes, and invalid UTF-8 made U+FFFD as by the decoder
	return key
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value that starts at raw[i].
func skipValue(raw []byte, i int) int {
	depth := 0
	for i < len(raw) {
		c := raw[i]
		switch {
		case c == '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
			i++
		case c == '{' || c == '[':
			depth++
			i++
		case c == '}' || c == ']':
			if depth == 0 {
				return i
			}
			depth--
			i++
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return i // the end of a number or a literal
		default:
			i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return i
		}
	}
	return i
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// structFields returns the JSON names of the fields of struct type t.
func structFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	jsonFields(t, fields)
	fieldCache.Store(t, fields)
	return fields
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
