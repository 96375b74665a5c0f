package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return sb.Errorf(sb.CodePayloadTooLarge, "The request body is larger than %d bytes.", MaxBodyBytes)
		}
		return sb.Invalid("body", "The request body could not be read.")
	}
	return decodeBytes(raw, v)
}

// decodeBytes is decode without the reading; the fuzz tests drive it.
func decodeBytes(raw []byte, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
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
	return nil
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
	// `json: unknown field "name"`.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return sb.Invalid(name, "Unknown field %q.", name)
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
