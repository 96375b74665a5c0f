package smpp

import (
	"strconv"
	"strings"

	sb "github.com/switchboard/switchboard"
)

// Receipt is an SMSC delivery receipt, from the short_message text of a
// deliver_sm (SMPP 3.4 Appendix B):
//
//	id:IIIIIIIIII sub:SSS dlvrd:DDD submit date:YYMMDDhhmm done date:YYMMDDhhmm stat:DDDDDDD err:E text: . . .
//
// SMSCs differ in case, order, padding and which fields they give; the
// parser takes the fields it finds, each where a word starts.
type Receipt struct {
	ID, Sub, Dlvrd, SubmitDate, DoneDate, Stat, Err, Text string
}

// receiptKeys are the fields of a receipt, longest first where one key ends
// another ("submit date" before "date"...).
var receiptKeys = []string{"submit date:", "done date:", "dlvrd:", "stat:", "text:", "sub:", "err:", "id:"}

// ParseReceipt reads the fields of a receipt's text. ok is false when the
// text has neither an id nor a stat: it is no receipt.
func ParseReceipt(text string) (r Receipt, ok bool) {
	lower := asciiLower(text)
	type field struct {
		key        string
		start, end int // of the value
	}
	var found []field
	for i := 0; i < len(lower); {
		if i > 0 && !isSpace(lower[i-1]) {
			i++
			continue
		}
		matched := false
		for _, k := range receiptKeys {
			if strings.HasPrefix(lower[i:], k) {
				found = append(found, field{key: k, start: i + len(k)})
				i += len(k)
				matched = true
				if k == "text:" {
					i = len(lower) // the text runs to the end
				}
				break
			}
		}
		if !matched {
			i++
		}
	}
	for j := range found {
		end := len(text)
		if j+1 < len(found) {
			end = found[j+1].start - len(found[j+1].key)
		}
		v := text[found[j].start:end]
		if found[j].key != "text:" {
			v = strings.TrimSpace(v)
			// A value is one word; what follows it is not a field we know.
			if k := strings.IndexFunc(v, func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\n' }); k >= 0 && found[j].key != "submit date:" && found[j].key != "done date:" {
				v = v[:k]
			}
		} else {
			v = strings.TrimLeft(v, " ")
		}
		switch found[j].key {
		case "id:":
			r.ID = v
		case "sub:":
			r.Sub = v
		case "dlvrd:":
			r.Dlvrd = v
		case "submit date:":
			r.SubmitDate = v
		case "done date:":
			r.DoneDate = v
		case "stat:":
			r.Stat = strings.ToUpper(v)
		case "err:":
			r.Err = v
		case "text:":
			r.Text = v
		}
	}
	return r, r.ID != "" || r.Stat != ""
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// asciiLower lowers ASCII letters only, so that byte offsets stay those of
// the original.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// Receipt stats (SMPP 3.4 Appendix B and table 5-6, message_state), with
// the message_state value of each.
var stats = map[string]int{
	"ENROUTE": 1, "DELIVRD": 2, "EXPIRED": 3, "DELETED": 4, "UNDELIV": 5, "ACCEPTD": 6, "UNKNOWN": 7, "REJECTD": 8,
}

// statOfState returns the stat of a message_state TLV value.
func statOfState(state byte) string {
	for name, v := range stats {
		if v == int(state) {
			return name
		}
	}
	return ""
}

// Outcome maps a receipt's stat to what it says of the message: DELIVRD
// delivered; UNDELIV, REJECTD, EXPIRED, DELETED and UNKNOWN failed, with
// "stat:... err:..." as the reason; ENROUTE and ACCEPTD (which SMSCs send
// for a message taken on) and any stat not known here change nothing. known
// is false for a stat that is not in SMPP 3.4.
func (r Receipt) Outcome() (state int, reason string, known bool) {
	stat := strings.ToUpper(strings.TrimSpace(r.Stat))
	_, known = stats[stat]
	switch stat {
	case "DELIVRD":
		return sb.ReceiptDelivered, "", true
	case "UNDELIV", "REJECTD", "EXPIRED", "DELETED", "UNKNOWN":
		reason = "SMPP receipt stat:" + stat
		if e := strings.TrimSpace(r.Err); e != "" {
			reason += " err:" + e
		}
		if d, ok := statWords[stat]; ok {
			reason += " (" + d + ")"
		}
		return sb.ReceiptFailed, reason, true
	}
	return sb.ReceiptPending, "", known
}

var statWords = map[string]string{
	"UNDELIV": "undeliverable",
	"REJECTD": "rejected by the SMSC",
	"EXPIRED": "validity period expired before delivery",
	"DELETED": "deleted by the SMSC",
	"UNKNOWN": "the SMSC does not know what became of it",
}

// normID is the form an SMSC's message id is kept and compared in: without
// spaces and NULs, hex letters in upper case, and without leading zeros
// (SMPP 3.4 Appendix B writes ids as 10 decimal digits, zero-padded, where
// the submit_sm_resp may have given "123456"). An id of zeros only is "0".
func normID(id string) string {
	const space = " \t\r\n\x00"
	id = strings.Map(asciiUpper, strings.TrimRight(id, space))
	// Leading zeros and blanks go together, so "00 000" is not left as
	// " 000" (which would normalise again to "0").
	t := strings.TrimLeft(id, space+"0")
	if t == "" && strings.Contains(id, "0") {
		return "0"
	}
	return t
}

// asciiUpper upper-cases a-z only: ids are ASCII, and Unicode case mapping
// could change a byte an SMSC sent that is not a letter of the id.
func asciiUpper(r rune) rune {
	if 'a' <= r && r <= 'z' {
		return r - 'a' + 'A'
	}
	return r
}

// altIDs returns the other forms an SMSC may give the same message id in
// a receipt and in its submit_sm_resp: some give one in decimal and the
// other in hexadecimal.
func altIDs(id string) []string {
	var out []string
	if v, err := strconv.ParseUint(id, 10, 64); err == nil {
		out = append(out, strings.ToUpper(strconv.FormatUint(v, 16)))
	}
	if v, err := strconv.ParseUint(id, 16, 64); err == nil {
		if d := strconv.FormatUint(v, 10); d != id {
			out = append(out, d)
		}
	}
	return out
}
