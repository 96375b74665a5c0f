package smpp

import (
	"hash/fnv"
	"unicode/utf16"

	"github.com/linxGnu/gosmpp/data"
	"github.com/linxGnu/gosmpp/pdu"
)

// Segment limits of one SMS (3GPP TS 23.038 and 23.040): 160 septets of
// GSM-7 or 70 UCS-2 characters alone; with the 6-octet concatenation header
// of a long message, 153 septets or 67 UCS-2 characters a part.
const (
	gsmSingle  = 160
	gsmPart    = 153
	ucs2Single = 70
	ucs2Part   = 67
	maxParts   = 255
)

// segment is one part of a text, encoded for short_message.
type segment struct {
	coding byte   // data_coding: 0 (SMSC default alphabet, GSM 03.38) or 8 (UCS-2)
	data   []byte // the encoded text, without header
	text   string
}

// isGSM7 reports whether every character of text is in the GSM 03.38
// default alphabet or its extension table.
func isGSM7(text string) bool { return len(data.ValidateGSM7String(text)) == 0 }

// gsmSeptets is how many septets r takes in GSM-7: 2 for a character of
// the extension table (escape + code), else 1.
func gsmSeptets(r rune) int {
	if data.IsEscapeChar(r) {
		return 2
	}
	return 1
}

// splitText cuts text into the segments of one SMS or of a concatenated
// long one: GSM-7 (sent unpacked, one septet an octet, as SMPP wants)
// when every character has a GSM-7 code, UCS-2 (UTF-16BE) otherwise. A
// GSM-7 escape sequence and a UTF-16 surrogate pair are never cut.
func splitText(text string) ([]segment, error) { return splitTextAs(text, data.GSM7BITCoding) }

// isASCII reports whether every character of text is in IA5 (ASCII).
func isASCII(text string) bool {
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return false
		}
	}
	return true
}

// splitTextAs is splitText for an SMSC whose 7-bit alphabet is the
// data_coding single: 0 (GSM 03.38, the default) or 1 (IA5, i.e. ASCII,
// one character an octet: a text outside ASCII goes as UCS-2).
func splitTextAs(text string, single byte) ([]segment, error) {
	runes := []rune(text)
	var cuts [][]rune
	var coding byte
	var enc data.Encoding
	septets := gsmSeptets
	fits := isGSM7(text)
	if single == data.ASCIICoding {
		septets = func(rune) int { return 1 }
		fits = isASCII(text)
	}
	if fits {
		coding, enc = data.GSM7BITCoding, data.GSM7BIT
		if single == data.ASCIICoding {
			coding, enc = data.ASCIICoding, data.ASCII
		}
		total := 0
		for _, r := range runes {
			total += septets(r)
		}
		if total <= gsmSingle {
			cuts = [][]rune{runes}
		} else {
			start, n := 0, 0
			for i, r := range runes {
				w := septets(r)
				if n+w > gsmPart {
					cuts = append(cuts, runes[start:i])
					start, n = i, 0
				}
				n += w
			}
			cuts = append(cuts, runes[start:])
		}
	} else {
		coding, enc = data.UCS2Coding, data.UCS2
		units := func(r rune) int { return utf16.RuneLen(r) }
		total := 0
		for _, r := range runes {
			total += max(units(r), 1)
		}
		if total <= ucs2Single {
			cuts = [][]rune{runes}
		} else {
			start, n := 0, 0
			for i, r := range runes {
				w := max(units(r), 1)
				if n+w > ucs2Part {
					cuts = append(cuts, runes[start:i])
					start, n = i, 0
				}
				n += w
			}
			cuts = append(cuts, runes[start:])
		}
	}
	if len(cuts) > maxParts {
		cuts = cuts[:maxParts]
	}
	out := make([]segment, 0, len(cuts))
	for _, c := range cuts {
		s := string(c)
		b, err := enc.Encode(s)
		if err != nil {
			return nil, err
		}
		out = append(out, segment{coding: coding, data: b, text: s})
	}
	return out, nil
}

// concatRef is where the search for a long message's reference starts: a
// hash of its id, so that parts written again after a restart mostly keep
// the reference of those written before (see Link.takeRef).
func concatRef(messageID string) uint16 {
	h := fnv.New32a()
	h.Write([]byte(messageID))
	return uint16(h.Sum32())
}

// shortMessage returns the short_message of part i of n of a message, with
// the concatenation header when n > 1 (IEI 0x00 with an 8-bit reference,
// or IEI 0x08 with a 16-bit one when udh16).
func shortMessage(seg segment, i, n int, ref uint16, udh16 bool) (pdu.ShortMessage, error) {
	var sm pdu.ShortMessage
	enc := data.FromDataCoding(seg.coding)
	if err := sm.SetMessageDataWithEncoding(seg.data, enc); err != nil {
		return sm, err
	}
	if n > 1 {
		if udh16 {
			sm.SetUDH(pdu.UDH{pdu.InfoElement{ID: 0x08, Data: []byte{byte(ref >> 8), byte(ref), byte(n), byte(i + 1)}}})
		} else {
			sm.SetUDH(pdu.UDH{pdu.NewIEConcatMessage(uint8(n), uint8(i+1), uint8(ref))})
		}
	}
	return sm, nil
}
