package smpp

import (
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/linxGnu/gosmpp/data"
)

// septets counts a GSM-7 text's septets.
func septets(s string) int {
	n := 0
	for _, r := range s {
		n += gsmSeptets(r)
	}
	return n
}

func TestSplitText(t *testing.T) {
	cases := []struct {
		name   string
		text   string
		coding byte
		parts  int
	}{
		{"short GSM-7", "Hello", data.GSM7BITCoding, 1},
		{"160 septets", strings.Repeat("a", 160), data.GSM7BITCoding, 1},
		{"161 septets", strings.Repeat("a", 161), data.GSM7BITCoding, 2},
		{"escapes count twice", strings.Repeat("€", 80), data.GSM7BITCoding, 1},
		{"escapes count twice, one more", strings.Repeat("€", 81), data.GSM7BITCoding, 2},
		{"GSM-7 accents", "Ça va? Très bien, à demain. ñ ü Ø", data.GSM7BITCoding, 1},
		{"an accent GSM-7 lacks", "Crêpes for two", data.UCS2Coding, 1}, // ê
		{"70 UCS-2", strings.Repeat("ж", 70), data.UCS2Coding, 1},
		{"71 UCS-2", strings.Repeat("ж", 71), data.UCS2Coding, 2},
		{"emoji are two units", strings.Repeat("😀", 35), data.UCS2Coding, 1},
		{"emoji, one more", strings.Repeat("😀", 36), data.UCS2Coding, 2},
		{"1600 GSM-7", strings.Repeat("x", 1600), data.GSM7BITCoding, 11},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			segs, err := splitText(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if len(segs) != tc.parts {
				t.Fatalf("%d parts, want %d", len(segs), tc.parts)
			}
			checkSegments(t, tc.text, segs)
			if segs[0].coding != tc.coding {
				t.Fatalf("coding %d, want %d", segs[0].coding, tc.coding)
			}
		})
	}
}

// checkSegments checks what every split must hold: the parts put together
// are the text, each fits its limit, and each decodes to its text.
func checkSegments(t *testing.T, text string, segs []segment) {
	t.Helper()
	var joined strings.Builder
	for _, s := range segs {
		joined.WriteString(s.text)
		limitGSM, limitUCS := gsmSingle, ucs2Single
		if len(segs) > 1 {
			limitGSM, limitUCS = gsmPart, ucs2Part
		}
		switch s.coding {
		case data.GSM7BITCoding:
			if n := septets(s.text); n > limitGSM {
				t.Fatalf("a GSM-7 part of %d septets", n)
			}
			if len(s.data) != septets(s.text) {
				t.Fatalf("a GSM-7 part of %d septets encoded in %d octets", septets(s.text), len(s.data))
			}
		case data.UCS2Coding:
			if n := len(utf16.Encode([]rune(s.text))); n > limitUCS {
				t.Fatalf("a UCS-2 part of %d units", n)
			}
		}
		got, err := data.FromDataCoding(s.coding).Decode(s.data)
		if err != nil || got != s.text {
			t.Fatalf("part decodes to %q (%v), want %q", got, err, s.text)
		}
	}
	if len(segs) < maxParts && joined.String() != text {
		t.Fatalf("the parts make %q, want %q", joined.String(), text)
	}
}

func FuzzSplitText(f *testing.F) {
	for _, s := range []string{"Hello", strings.Repeat("€a", 100), "Привет 👋", strings.Repeat("😀x", 50), "", "{}[]~^|\\€\f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) || utf8.RuneCountInString(text) > 1600 {
			return
		}
		segs, err := splitText(text)
		if err != nil {
			return // a text no character set can carry (invalid code points)
		}
		if len(segs) == 0 {
			t.Fatal("no parts")
		}
		for _, s := range segs[1:] {
			if s.coding != segs[0].coding {
				t.Fatal("parts of one text in different codings")
			}
		}
		if strings.ContainsRune(text, utf8.RuneError) {
			return
		}
		checkSegments(t, text, segs)
	})
}

func TestConcatRefStable(t *testing.T) {
	if concatRef("01J0000000000000000000000A") != concatRef("01J0000000000000000000000A") {
		t.Fatal("the reference of a message changed")
	}
}
