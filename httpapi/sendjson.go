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
	return decodeBytes(raw, req)
}

// sendFast fills req from a JSON object whose members are all strings
// without escapes, control characters or invalid UTF-8, each of to, body,
// template, channel or from at most once. For every other body it reports
// false and leaves req as it was.
func sendFast(raw []byte, req *sendRequest) bool {
	// Where each field's content lies in raw, in the order of fields below
	// (end 0: absent); the strings are made once the whole body is read.
	var spans [5]struct{ start, end int }
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
		var f int
		switch string(raw[k : kEnd-1]) {
		case "to":
			f = 0
		case "body":
			f = 1
		case "template":
			f = 2
		case "channel":
			f = 3
		case "from":
			f = 4
		default:
			return false
		}
		if spans[f].end != 0 {
			return false
		}
		spans[f].start, spans[f].end = v, vEnd-1
		if i = skipSpace(raw, vEnd); i == len(raw) {
			return false
		}
		if raw[i] == '}' {
			break
		}
		if raw[i] != ',' {
			return false
		}
		i = skipSpace(raw, i+1)
	}
	if skipSpace(raw, i+1) != len(raw) {
		return false
	}
	text := string(raw) // one copy; the fields are slices of it
	fields := [len(spans)]**string{&req.To, &req.Body, &req.Template, &req.Channel, &req.From}
	for f, sp := range spans {
		if sp.end != 0 {
			v := text[sp.start:sp.end]
			*fields[f] = &v
		}
	}
	return true
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
