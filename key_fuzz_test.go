package switchboard

import (
	"regexp"
	"strings"
	"testing"
)

// fuzzKeyTextRE is the reference form of key text (docs/api.md).
var fuzzKeyTextRE = regexp.MustCompile(`^svc_(live|test)_[0-9A-Za-z]{32}$`)

const fuzzSecret = "0123456789ABCDEFGHIJKLMNOPQRSTUV" // 32 characters

// FuzzParseKeyText checks ParseKeyText against the reference regexp, and
// that KeyHint and NewKeyText hold their promises for any input.
func FuzzParseKeyText(f *testing.F) {
	seeds := []string{
		"svc_live_" + fuzzSecret,
		"svc_test_" + fuzzSecret,
		"svc_live_abcdefghijklmnopqrstuvwxyzABCDEF",
		"svc_test_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
		"svc_live_" + fuzzSecret[:31],       // 31 characters
		"svc_live_" + fuzzSecret + "W",      // 33 characters
		"svc_test_" + fuzzSecret[:31],       // 31 characters
		"svc_test_" + fuzzSecret + "0",      // 33 characters
		"svc_prod_" + fuzzSecret,            // wrong environment
		"svc_LIVE_" + fuzzSecret,            // wrong case
		"SVC_live_" + fuzzSecret,            // wrong case
		"sk_live_" + fuzzSecret + "0",       // another vendor's prefix
		"svc_live" + fuzzSecret + "0",       // missing underscore
		"svc__live_" + fuzzSecret[:31],      // doubled underscore
		"svc_live_" + fuzzSecret[:31] + "_", // underscore in the secret
		"svc_live_" + fuzzSecret[:31] + "-",
		"svc_live_" + fuzzSecret[:31] + " ",
		" svc_live_" + fuzzSecret,
		"svc_live_" + fuzzSecret + "\n",
		"svc_live_" + fuzzSecret[:31] + "\x00",
		"svc_live_" + fuzzSecret[:30] + "é",                // two bytes, one rune: 32 bytes
		"svc_live_" + fuzzSecret[:29] + "日",                // three bytes, one rune: 32 bytes
		"svc_live_" + fuzzSecret[:28] + "\xff\xfe\xfd\xfc", // invalid UTF-8
		"svc_live_" + fuzzSecret[:31] + "\u0660",           // Arabic-Indic digit zero
		"svc_live_" + strings.Repeat("Ａ", 32),              // fullwidth letters
		"svc_live_",
		"svc_test_",
		"svc_",
		"",
		"a",
		"abc",
		"abcd",
		"Bearer svc_live_" + fuzzSecret,
		strings.Repeat("svc_live_", 1000),
		"svc_live_" + strings.Repeat("a", 1<<12),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		env, ok := ParseKeyText(s)
		want := fuzzKeyTextRE.MatchString(s)
		if ok != want {
			t.Fatalf("ParseKeyText(%q) ok = %v, reference regexp says %v", s, ok, want)
		}
		if ok {
			var wantEnv Environment
			switch {
			case strings.HasPrefix(s, "svc_live_"):
				wantEnv = Live
			case strings.HasPrefix(s, "svc_test_"):
				wantEnv = Test
			}
			if env != wantEnv {
				t.Fatalf("ParseKeyText(%q) env = %q, want %q", s, env, wantEnv)
			}
			if !env.Valid() {
				t.Fatalf("ParseKeyText(%q) returned invalid env %q", s, env)
			}
		}

		hint := KeyHint(s)
		if !strings.HasPrefix(hint, "...") {
			t.Fatalf("KeyHint(%q) = %q, want a \"...\" prefix", s, hint)
		}
		if len(s) >= 4 {
			if want := "..." + s[len(s)-4:]; hint != want {
				t.Fatalf("KeyHint(%q) = %q, want %q", s, hint, want)
			}
		} else if hint != "..." {
			// Shorter than four characters: nothing of it is shown.
			t.Fatalf("KeyHint(%q) = %q, want %q", s, hint, "...")
		}
		if ok && len(hint) != 7 {
			t.Fatalf("KeyHint of valid key %q = %q, want 7 bytes", s, hint)
		}

		// HashKey is a pure function of the text: 64 lowercase hex digits.
		h := HashKey(s)
		if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" || h != HashKey(s) {
			t.Fatalf("HashKey(%q) = %q", s, h)
		}

		// Fresh key text of both environments always parses, to its own
		// environment, and its hint is taken from its own tail.
		for _, e := range []Environment{Live, Test} {
			k, err := NewKeyText(e)
			if err != nil {
				t.Fatalf("NewKeyText(%q): %v", e, err)
			}
			got, ok := ParseKeyText(k)
			if !ok || got != e || !fuzzKeyTextRE.MatchString(k) {
				t.Fatalf("NewKeyText(%q) = %q does not parse back (env %q, ok %v)", e, k, got, ok)
			}
			if KeyHint(k) != "..."+k[len(k)-4:] {
				t.Fatalf("KeyHint(%q) = %q", k, KeyHint(k))
			}
		}
	})
}
