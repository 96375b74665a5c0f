package tmpl

import (
	"errors"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestParseValid(t *testing.T) {
	name64 := "n" + strings.Repeat("a", 63)
	tests := []struct {
		body string
		vars []string
		data map[string]string
		want string
	}{
		{"Hello", nil, nil, "Hello"},
		{"x", nil, nil, "x"},
		{"Hi {{name}}, your code is {{ code }}.", []string{"name", "code"},
			map[string]string{"name": "Ann", "code": "1234"}, "Hi Ann, your code is 1234."},
		{"{{a}}{{b}}{{a}}", []string{"a", "b"}, map[string]string{"a": "1", "b": "2"}, "121"},
		{"{{  spaced   }}", []string{"spaced"}, map[string]string{"spaced": "ok"}, "ok"},
		{"{{ left}}{{right }}", []string{"left", "right"}, map[string]string{"left": "L", "right": "R"}, "LR"},
		{"{{_x}} {{A}} {{a.b-c_d9}}", []string{"_x", "A", "a.b-c_d9"},
			map[string]string{"_x": "1", "A": "2", "a.b-c_d9": "3"}, "1 2 3"},
		{"{{" + name64 + "}}", []string{name64}, map[string]string{name64: "long"}, "long"},
		{"Olá {{nome}} 👋", []string{"nome"}, map[string]string{"nome": "Zoë"}, "Olá Zoë 👋"},

		// Braces that do not make "{{" are text.
		{"{ {a} }", nil, nil, "{ {a} }"},
		{"}}", nil, nil, "}}"},
		{"a } b { c", nil, nil, "a } b { c"},
		{"{", nil, nil, "{"},
		{"{{a}}}", []string{"a"}, map[string]string{"a": "x"}, "x}"},
		{"{{a}}}}", []string{"a"}, map[string]string{"a": "x"}, "x}}"},
		{"{x{{a}}", []string{"a"}, map[string]string{"a": "y"}, "{xy"},
		{"{{a}}{", []string{"a"}, map[string]string{"a": "y"}, "y{"},

		// Values are inserted as they are, never parsed again.
		{"{{a}}", []string{"a"}, map[string]string{"a": "{{b}}"}, "{{b}}"},
		// Unused keys are ignored and empty values count.
		{"[{{a}}]", []string{"a"}, map[string]string{"a": "", "unused": "z"}, "[]"},

		// Length limits count characters, not bytes.
		{strings.Repeat("a", MaxBodyLen), nil, nil, strings.Repeat("a", MaxBodyLen)},
		{strings.Repeat("é", MaxBodyLen), nil, nil, strings.Repeat("é", MaxBodyLen)},
	}
	for _, tt := range tests {
		tm, err := Parse(tt.body)
		if err != nil {
			t.Errorf("Parse(%.40q) error: %v", tt.body, err)
			continue
		}
		if got := tm.Variables(); !slices.Equal(got, tt.vars) {
			t.Errorf("Parse(%.40q).Variables() = %q, want %q", tt.body, got, tt.vars)
		}
		if got, err := Variables(tt.body); err != nil || !slices.Equal(got, tt.vars) {
			t.Errorf("Variables(%.40q) = %q, %v; want %q", tt.body, got, err, tt.vars)
		}
		if got, err := tm.Render(tt.data); err != nil || got != tt.want {
			t.Errorf("Parse(%.40q).Render(%v) = %.40q, %v; want %.40q", tt.body, tt.data, got, err, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		body   string
		kind   Kind
		offset int
	}{
		{"", EmptyBody, 0},
		{"\xff", InvalidUTF8, 0},
		{"ab\xffc", InvalidUTF8, 2},
		{"{{a}} \xe2\x82", InvalidUTF8, 6}, // Truncated '€'.
		{strings.Repeat("a", MaxBodyLen+1), BodyTooLong, MaxBodyLen},
		{strings.Repeat("é", MaxBodyLen+1), BodyTooLong, 2 * MaxBodyLen},

		{"{{", Unclosed, 0},
		{"Hi {{name", Unclosed, 3},
		{"Hi {{name}", Unclosed, 3},
		{"Hi {{name}} and {{", Unclosed, 16},
		{"{{}", Unclosed, 0},

		{"{{}}", EmptyName, 0},
		{"x{{ }}", EmptyName, 1},
		{"{{      }}", EmptyName, 0},
		{"{{ }} {{", EmptyName, 0}, // The first problem wins.

		{"{{a b}}", InvalidName, 3},
		{"Dear {{first name}}", InvalidName, 12},
		{"{{1abc}}", InvalidName, 2},
		{"{{ 1abc }}", InvalidName, 3},
		{"{{-a}}", InvalidName, 2},
		{"{{.a}}", InvalidName, 2},
		{"{{a!}}", InvalidName, 3},
		{"{{\tname}}", InvalidName, 2}, // Only spaces may pad a name.
		{"{{name\n}}", InvalidName, 6},
		{"{{na\u00efve}}", InvalidName, 4},
		{"{{{name}}}", InvalidName, 2},
		{"{{a}b}}", InvalidName, 3},
		{"{{a {{b}}", InvalidName, 3},
		{"{{$name}}", InvalidName, 2},
		{"{{name|upper}}", InvalidName, 6},

		{"{{n" + strings.Repeat("a", MaxNameLen) + "}}", NameTooLong, 2},
		{"ok {{  n" + strings.Repeat("a", MaxNameLen) + " }}", NameTooLong, 7},
	}
	for _, tt := range tests {
		tm, err := Parse(tt.body)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%.40q) = %v, %v; want a *SyntaxError", tt.body, tm, err)
			continue
		}
		if tm != nil {
			t.Errorf("Parse(%.40q) returned a template along with error %v", tt.body, err)
		}
		if se.Kind != tt.kind || se.Offset != tt.offset {
			t.Errorf("Parse(%.40q) error %v: got kind %v at %d, want %v at %d",
				tt.body, err, se.Kind, se.Offset, tt.kind, tt.offset)
		}
		if _, verr := Variables(tt.body); !errors.As(verr, &se) {
			t.Errorf("Variables(%.40q) error = %v, want a *SyntaxError", tt.body, verr)
		}
	}
}

func TestSyntaxErrorMessage(t *testing.T) {
	_, err := Parse("Hi {{name")
	if got, want := err.Error(), `tmpl: unclosed placeholder at byte 3: no "}}" after "{{"`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	_, err = Parse("Dear {{first name}}")
	if got, want := err.Error(), `tmpl: invalid variable name at byte 12: character ' ' not allowed in "{{first name}}"`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	if got, want := (&SyntaxError{Kind: EmptyBody}).Error(), "tmpl: empty template body at byte 0"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	for k := EmptyBody; k <= NameTooLong; k++ {
		if s := k.String(); s == "" || strings.HasPrefix(s, "Kind(") {
			t.Errorf("Kind %d has no description", k)
		}
	}
	if got := Kind(200).String(); got != "Kind(200)" {
		t.Errorf("Kind(200).String() = %q", got)
	}
}

func TestRenderMissing(t *testing.T) {
	tm, err := Parse("{{a}} {{b}} {{a}} {{c}}")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		data map[string]string
		want string // The missing variable, or "" for success.
	}{
		{nil, "a"},
		{map[string]string{}, "a"},
		{map[string]string{"b": "2", "c": "3"}, "a"},
		{map[string]string{"a": "1"}, "b"},
		{map[string]string{"a": "1", "b": "2"}, "c"},
		{map[string]string{"A": "1", "b": "2", "c": "3"}, "a"}, // Names are case-sensitive.
		{map[string]string{"a": "", "b": "", "c": ""}, ""},
	}
	for _, tt := range tests {
		out, err := tm.Render(tt.data)
		if tt.want == "" {
			if err != nil {
				t.Errorf("Render(%v) error: %v", tt.data, err)
			}
			continue
		}
		var mv *MissingVarError
		if !errors.As(err, &mv) || mv.Name != tt.want {
			t.Errorf("Render(%v) = %q, %v; want MissingVarError{%q}", tt.data, out, err, tt.want)
		}
		if out != "" {
			t.Errorf("Render(%v) returned output %q along with an error", tt.data, out)
		}
	}
	if got, want := (&MissingVarError{Name: "code"}).Error(), `tmpl: no value for variable "code"`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func TestVariablesIsACopy(t *testing.T) {
	tm, err := Parse("{{a}} {{b}}")
	if err != nil {
		t.Fatal(err)
	}
	v := tm.Variables()
	v[0] = "changed"
	if got := tm.Variables(); got[0] != "a" {
		t.Errorf("modifying Variables' result changed the template: %q", got)
	}
	if out, err := tm.Render(map[string]string{"a": "1", "b": "2"}); err != nil || out != "1 2" {
		t.Errorf("Render = %q, %v", out, err)
	}
}

func TestZeroTemplate(t *testing.T) {
	var tm Template
	if out, err := tm.Render(nil); out != "" || err != nil {
		t.Errorf("zero Template renders %q, %v; want empty", out, err)
	}
	if v := tm.Variables(); len(v) != 0 {
		t.Errorf("zero Template has variables %q", v)
	}
}

func TestRenderConcurrent(t *testing.T) {
	tm, err := Parse("Hi {{name}}, code {{code}}")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				out, err := tm.Render(map[string]string{"name": "A", "code": "1"})
				if err != nil || out != "Hi A, code 1" {
					t.Errorf("Render = %q, %v", out, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// placeholderRef matches one placeholder. It is the reference the fuzz test
// checks Parse against.
var placeholderRef = regexp.MustCompile(`\{\{ *([A-Za-z_][A-Za-z0-9_.\-]{0,63}) *\}\}`)

// refParse is a reference implementation of the syntax check. It reports
// whether body is a valid template and, if so, its variables in order of
// first use and the text it renders to when every variable is "x".
//
// A body is valid when, after every regexp match is replaced by a marker,
// no "{{" is left (an unclosed or malformed placeholder) and no '{' sits
// right before a marker (as in "{{{a}}", where Parse's leftmost "{{" starts
// a malformed placeholder but the regexp matches one byte later).
func refParse(body string) (ok bool, vars []string, renderedX string) {
	if !utf8.ValidString(body) {
		return false, nil, ""
	}
	if n := utf8.RuneCountInString(body); n < 1 || n > MaxBodyLen {
		return false, nil, ""
	}
	// The marker stands for a placeholder: one rune the body does not hold,
	// so that it cannot run together with the text around it (with "\x00"
	// repeated, "{\x00" followed by the marker read as "{" + marker).
	marker := "\ue000"
	for r := '\ue000'; strings.ContainsRune(body, r); r++ {
		marker = string(r + 1)
	}
	stripped := placeholderRef.ReplaceAllLiteralString(body, marker)
	if strings.Contains(stripped, "{{") || strings.Contains(stripped, "{"+marker) {
		return false, nil, ""
	}
	for _, m := range placeholderRef.FindAllStringSubmatch(body, -1) {
		if !slices.Contains(vars, m[1]) {
			vars = append(vars, m[1])
		}
	}
	return true, vars, placeholderRef.ReplaceAllLiteralString(body, "x")
}

func TestRefParseAgreesOnTables(t *testing.T) {
	// Keeps the reference honest: it must agree with the hand-written cases.
	for _, body := range []string{"{{a}}}", "{{{a}}}", "{x{{a}}", "{{a {{b}}", "{{ }} {{", "Hi {{ name }}"} {
		got := func() bool { _, err := Parse(body); return err == nil }()
		if ref, _, _ := refParse(body); ref != got {
			t.Errorf("%q: Parse ok=%v, reference ok=%v", body, got, ref)
		}
	}
}

func FuzzParseRender(f *testing.F) {
	for _, s := range []string{
		"Hello", "Hi {{name}}, your code is {{ code }}.", "{{a}}{{b}}{{a}}", "{{  spaced   }}",
		"{{_x}} {{A}} {{a.b-c_d9}}", "{ {a} }", "}}", "{{a}}}", "{{{a}}}", "{x{{a}}", "{{a}}{",
		"{{", "Hi {{name", "{{}}", "{{ }}", "{{a b}}", "{{1abc}}", "{{a}b}}", "{{a {{b}}",
		"{{\tname}}", "{{na\u00efve}}", "ab\xffc", "Olá {{nome}} 👋", "\x00{{a}}\x00",
		"{{n" + strings.Repeat("a", 63) + "}}", "{{n" + strings.Repeat("a", 64) + "}}",
		strings.Repeat("{{a}}", 320), strings.Repeat("a", MaxBodyLen+1),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		tm, err := Parse(body)
		refOK, refVars, refX := refParse(body)
		if (err == nil) != refOK {
			t.Fatalf("Parse(%q) error = %v, but the reference says valid=%v", body, err, refOK)
		}
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error %v is not a *SyntaxError", body, err)
			}
			if se.Offset < 0 || se.Offset > len(body) || se.Kind < EmptyBody || se.Kind > NameTooLong {
				t.Fatalf("Parse(%q) error %+v has a bad kind or offset", body, se)
			}
			if (se.Kind == Unclosed || se.Kind == EmptyName) && !strings.HasPrefix(body[se.Offset:], "{{") {
				t.Fatalf("Parse(%q) error %v does not point at a \"{{\"", body, err)
			}
			return
		}

		vars := tm.Variables()
		if !slices.Equal(vars, refVars) {
			t.Fatalf("Parse(%q).Variables() = %q, reference says %q", body, vars, refVars)
		}

		// Every variable set to "x": success, matching the reference, and
		// no "{{" anywhere, since every "{{" in a valid body is a placeholder.
		data := make(map[string]string, len(vars))
		for _, v := range vars {
			data[v] = "x"
		}
		out, err := tm.Render(data)
		if err != nil {
			t.Fatalf("Parse(%q).Render(all x) error: %v", body, err)
		}
		if out != refX {
			t.Fatalf("Parse(%q).Render(all x) = %q, reference says %q", body, out, refX)
		}
		if strings.Contains(out, "{{") {
			t.Fatalf("Parse(%q).Render(all x) = %q still contains \"{{\"", body, out)
		}

		// The output has no placeholders left, so it is itself a template
		// with no variables that renders to itself.
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Render(Parse(%q))) = %v", body, err)
		}
		if v := again.Variables(); len(v) != 0 {
			t.Fatalf("re-parsed output %q has variables %q", out, v)
		}
		if again2, err := again.Render(nil); err != nil || again2 != out {
			t.Fatalf("re-parsed output %q renders to %q, %v", out, again2, err)
		}
		if len(vars) == 0 && out != body {
			t.Fatalf("template %q without placeholders renders to %q", body, out)
		}

		// Leaving out any one variable reports exactly that one.
		for _, missing := range vars {
			partial := make(map[string]string, len(data))
			for k, v := range data {
				if k != missing {
					partial[k] = v
				}
			}
			_, err := tm.Render(partial)
			var mv *MissingVarError
			if !errors.As(err, &mv) || mv.Name != missing {
				t.Fatalf("Parse(%q).Render without %q: error = %v, want MissingVarError", body, missing, err)
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	body := "Hi {{name}}, your {{ product }} order {{order_id}} ships on {{date}}. Reply STOP to opt out."
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	tm, err := Parse("Hi {{name}}, your {{ product }} order {{order_id}} ships on {{date}}. Reply STOP to opt out.")
	if err != nil {
		b.Fatal(err)
	}
	data := map[string]string{"name": "Ann", "product": "widget", "order_id": "A-1234", "date": "1 May", "unused": "z"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tm.Render(data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRenderTooLong(t *testing.T) {
	tm, err := Parse(strings.Repeat("{{a}}", 320)) // 1,600 characters
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		value string
		ok    bool
	}{
		{"12345", true},   // 1,600 characters out
		{"1234é", true},   // characters, not bytes
		{"123456", false}, // 1,920
		{"", true},
		{strings.Repeat("x", 1<<16), false},
	} {
		out, err := tm.Render(map[string]string{"a": tt.value})
		var tooLong *TooLongError
		switch {
		case tt.ok && (err != nil || utf8.RuneCountInString(out) != 320*utf8.RuneCountInString(tt.value)):
			t.Errorf("Render(a=%.10q) = %d characters, %v; want %d", tt.value, utf8.RuneCountInString(out), err, 320*len(tt.value))
		case !tt.ok && (!errors.As(err, &tooLong) || tooLong.Limit != MaxBodyLen || out != ""):
			t.Errorf("Render(a=%.10q) = %d characters, %v; want TooLongError{%d}", tt.value, len(out), err, MaxBodyLen)
		}
	}
	// Text and values together: 1,595 characters of text and one {{a}}.
	tm, _ = Parse(strings.Repeat("y", 1595) + "{{a}}")
	if _, err := tm.Render(map[string]string{"a": "12345"}); err != nil {
		t.Errorf("1,600 characters: %v", err)
	}
	if _, err := tm.Render(map[string]string{"a": "123456"}); err == nil {
		t.Errorf("1,601 characters rendered")
	}
	// A missing variable is reported before the length.
	tm, _ = Parse("{{a}}{{b}}")
	if _, err := tm.Render(map[string]string{"a": strings.Repeat("x", 2000)}); !errors.As(err, new(*MissingVarError)) {
		t.Errorf("missing b with a too long: %v, want MissingVarError", err)
	}
}

// TestRenderTooLongAllocatesNothing is the security review's attack: a
// template repeating one variable 320 times with a large value. Rendering
// must find out that the output is too long before it allocates for it.
func TestRenderTooLongAllocatesNothing(t *testing.T) {
	tm, err := Parse(strings.Repeat("{{a}}", 320))
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]string{"a": strings.Repeat("x", 1<<16)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		if _, err := tm.Render(data); err == nil {
			t.Fatal("rendered")
		}
	}
	runtime.ReadMemStats(&after)
	// Rendering in full would be 20 MiB a call.
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Fatalf("20 refused renders allocated %d bytes, want under 64 KiB", got)
	}
}

// TestDescribe: the author of a template is told what is wrong and where,
// in characters from 1, without the package's name.
func TestDescribe(t *testing.T) {
	for body, want := range map[string]string{
		"Héllo {{ name":    `unclosed placeholder at character 7 (no "}}" after "{{")`,
		"{{}}":             `empty variable name at character 1 ("{{}}")`,
		"ñ {{ a b }}":      "invalid variable name at character ",
		"ok {{ 9lives }}!": "invalid variable name at character ",
	} {
		_, err := Parse(body)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("Parse(%q) = %v, want a *SyntaxError", body, err)
		}
		got := se.Describe(body)
		if !strings.HasPrefix(got, want) || strings.Contains(got, "tmpl:") || strings.Contains(got, "byte") {
			t.Errorf("Describe of %q = %q, want it to start %q", body, got, want)
		}
	}
	if _, err := Parse(""); err != nil {
		var se *SyntaxError
		if errors.As(err, &se) && se.Describe("") != "empty template body" {
			t.Errorf("Describe of the empty body = %q", se.Describe(""))
		}
	}
}
