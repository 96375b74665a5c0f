package phonenum

import (
	"regexp"
	"strings"
	"testing"
)

// validRef is the API's E.164 rule written as a regular expression. It
// is the reference implementation Valid is checked against.
var validRef = regexp.MustCompile(`^\+[1-9][0-9]{9,14}$`)

func TestValid(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		// Accepted.
		{"+12125551234", true},
		{"+442071234567", true},
		{"+1234567890", true},      // 10 digits, the minimum.
		{"+123456789012345", true}, // 15 digits, the maximum.
		{"+999999999999999", true},
		{"+10000000000", true}, // Zeros are fine after the first digit.

		// Wrong length.
		{"", false},
		{"+", false},
		{"+1", false},
		{"+123456789", false},        // 9 digits.
		{"+1234567890123456", false}, // 16 digits.
		{"+12345678901234567890", false},

		// Wrong start.
		{"12125551234", false},       // No plus.
		{"+02125551234", false},      // Leading zero.
		{"++12125551234", false},     // Two pluses.
		{"0012125551234", false},     // International prefix instead of plus.
		{" +12125551234", false},     // Leading space.
		{"\uFF0B12125551234", false}, // Full-width plus.

		// Anything but digits after the plus.
		{"+1 212 555 1234", false},
		{"+1-212-555-1234", false},
		{"+1(212)5551234", false},
		{"+12125551234 ", false},
		{"+12125551234\n", false},
		{"+1212555123a", false},
		{"+1212555123+", false},
		{"+12125551234\x00", false},
		{"+1212555123\u0661", false}, // Arabic-Indic digit one.
		{"+１２１２５５５１２３４", false},      // Full-width digits.
		{"+1212/5551234", false},     // '/' sorts just below '0'.
		{"+1212:5551234", false},     // ':' sorts just above '9'.
	}
	for _, tt := range tests {
		if got := Valid(tt.in); got != tt.want {
			t.Errorf("Valid(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if ref := validRef.MatchString(tt.in); ref != tt.want {
			t.Errorf("test table disagrees with the reference for %q: reference says %v", tt.in, ref)
		}
	}
}

func TestValidDoesNotAllocate(t *testing.T) {
	inputs := []string{"+12125551234", "+1 212 555 1234", "", strings.Repeat("9", 40)}
	allocs := testing.AllocsPerRun(100, func() {
		for _, s := range inputs {
			Valid(s)
		}
	})
	if allocs != 0 {
		t.Errorf("Valid allocates %v times per run, want 0", allocs)
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{
		"", "+", "+1", "+12125551234", "+442071234567", "+1234567890", "+123456789",
		"+123456789012345", "+1234567890123456", "+02125551234", "12125551234",
		"+1 212 555 1234", "+1-212-555-1234", "++12125551234", "+1212555123a",
		"+1212555123\u0661", "+12125551234\n", "\xff\xfe", "+1212/5551234", "+1212:5551234",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Valid(s), validRef.MatchString(s); got != want {
			t.Errorf("Valid(%q) = %v, reference says %v", s, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Valid("+12125551234")
		Valid("+1 212 555 1234")
	}
}

func TestNormalize(t *testing.T) {
	for _, c := range []struct{ raw, like, want string }{
		{"+15417543010", "+12125550123", "+15417543010"},
		{"(541) 754-3010", "+12125550123", "+15417543010"},
		{"541-754-3010", "+12125550123", "+15417543010"},
		{"020 7123 4567", "+447911123456", "+442071234567"},
		{"011 44 20 7123 4567", "+12125550123", "+442071234567"},
		{"0033 1 42 68 53 00", "+447911123456", "+33142685300"},
		{" AMAZON ", "+12125550123", "AMAZON"},
		{"12345", "+12125550123", "12345"},
		{"020 7123 4567", "", "020 7123 4567"},
	} {
		if got := Normalize(c.raw, c.like); got != c.want {
			t.Errorf("Normalize(%q, %q) = %q, want %q", c.raw, c.like, got, c.want)
		}
	}
}

func TestInboundSender(t *testing.T) {
	for _, c := range []struct{ raw, like, want string }{
		{"+15551234567", "", "+15551234567"},
		{" (415) 555-0100 ", "+14155550199", "+14155550100"}, // national, read in the phone's country
		{"AMAZON", "+14155550199", "AMAZON"},
		{"My Bank", "", "My Bank"},
		{"12345", "+14155550199", "12345"}, // a short code
		{"abc", "", "abc"},
		{"ABCDEFGHIJK", "", "ABCDEFGHIJK"},
	} {
		if got, ok := InboundSender(c.raw, c.like); !ok || got != c.want {
			t.Errorf("InboundSender(%q, %q) = %q, %v; want %q", c.raw, c.like, got, ok, c.want)
		}
	}
	for _, raw := range []string{"", "ab", "ABCDEFGHIJKL", "<script>", "=HYPERLINK(", "+1", "-Bank", "My  Bank!", "Bänk", "a\tb", "+15551234567890123"} {
		if got, ok := InboundSender(raw, "+14155550199"); ok || got != "" {
			t.Errorf("InboundSender(%q) = %q, %v; want refused", raw, got, ok)
		}
	}
}

func FuzzInboundSender(f *testing.F) {
	for _, s := range []string{"+15551234567", "AMAZON", "(415) 555-0100", "<script>", "12345", " a b "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, ok := InboundSender(raw, "+14155550199")
		if !ok {
			if got != "" {
				t.Fatalf("refused %q, yet returned %q", raw, got)
			}
			return
		}
		if Valid(got) {
			return
		}
		if len(got) < MinSenderID || len(got) > MaxSenderID || strings.TrimSpace(got) != got {
			t.Fatalf("InboundSender(%q) = %q", raw, got)
		}
		for _, c := range got {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ' ') {
				t.Fatalf("InboundSender(%q) = %q", raw, got)
			}
		}
	})
}

func TestCompact(t *testing.T) {
	for in, want := range map[string]string{
		"+15550003333":                   "+15550003333",
		" +15550003333 ":                 "+15550003333",
		"+1 555 000 3333":                "+15550003333",
		"+1 (555) 000-3333":              "+15550003333",
		"+44 20 7123 4567":               "+442071234567",
		"+1.555.000.3333":                "+15550003333",
		"+1\u00a0555\u00a0000\u00a03333": "+15550003333",
		"+1 555 000\u20113333":           "+15550003333",
	} {
		if got, ok := Compact(in); !ok || got != want {
			t.Errorf("Compact(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "555 000 3333", "1 555 000 3333", "+1 555 00", "+1 555 000 3333 x12", "+1/555/000/3333", "++15550003333", "+0 555 000 3333"} {
		if got, ok := Compact(in); ok {
			t.Errorf("Compact(%q) = %q, valid; want invalid", in, got)
		}
	}
}
