package httpapi

import "unicode/utf8"

// decodeSend decodes a send body. The usual body, a flat object of plain
// strings such as {"to":"+1...","body":"Hi","channel":"auto"}, is read by
// sendFast; anything else (escapes, data, null, a repeated or unknown key,
// bad JSON) goes through decodeBytes, which gives the errors.
// FuzzSendFast checks that sendFast never accepts a body that decodeBytes
// would read differently.
func decodeSend(raw []byte, req *sendRequest) error {
	if sendFast(raw, req) {
		return nil
	}
	*req = sendRequest{}
	return decodeBytes(raw, req)
}

// sendFast fills req from a JSON object whose members are all strings
// without escapes, control characters or invalid UTF-8, each of to, body,
// template, channel or from at most once; req must be empty on entry. It
// reports false, leaving req in any state, for every other body.
func sendFast(raw []byte, req *sendRequest) bool {
	text := string(raw) // one copy; the fields are slices of it
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return false // {} fails validation; let the slow path say how
	}
	for {
		k, kEnd, ok := plainString(raw, i)
		if !ok {
			return false
		}
		if i = skipSpace(raw, kEnd); i == len(raw) || raw[i] != ':' {
			return false
		}
		v, vEnd, ok := plainString(raw, skipSpace(raw, i+1))
		if !ok {
			return false
		}
		i = vEnd
		key, val := text[k:kEnd-1], text[v:vEnd-1]
		var field **string
		switch key {
		case "to":
			field = &req.To
		case "body":
			field = &req.Body
		case "template":
			field = &req.Template
		case "channel":
			field = &req.Channel
		case "from":
			field = &req.From
		default:
			return false
		}
		if *field != nil {
			return false
		}
		*field = &val
		if i = skipSpace(raw, i); i == len(raw) {
			return false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return skipSpace(raw, i+1) == len(raw)
		default:
			return false
		}
	}
}

// plainString finds the JSON string at raw[i] if it needs no decoding: no
// backslash, no control character, valid UTF-8. It returns where its
// content starts and the index after its closing quote.
func plainString(raw []byte, i int) (start, end int, ok bool) {
	if i == len(raw) || raw[i] != '"' {
		return 0, 0, false
	}
	start = i + 1
	ascii := true
	for j := start; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			s := raw[start:j]
			if !ascii && !utf8.Valid(s) {
				return 0, 0, false
			}
			return start, j + 1, true
		case c == '\\' || c < 0x20:
			return 0, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return 0, 0, false
}
