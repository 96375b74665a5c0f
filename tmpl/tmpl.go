// Package tmpl implements the message template language.
//
// A template body is UTF-8 text of 1 to 1600 characters (Unicode code
// points) in which variables are written {{name}}, with optional spaces
// inside the braces: {{name}}, {{ name }} and {{name  }} are the same
// placeholder. A variable name is 1 to 64 characters from ASCII letters,
// digits, '_', '-' and '.', and starts with a letter or '_'.
//
// Every "{{" in a body opens a placeholder. One that is never closed by "}}",
// or whose braces do not hold a valid name (as in "{{ }}" or "{{first name}}"),
// makes the body invalid, so typos are caught when the template is created
// rather than sent to recipients; Parse reports them as a *SyntaxError with
// the byte offset of the problem. A lone '{', and "}" or "}}" outside a
// placeholder, are ordinary text. There is no way to write a literal "{{".
//
// Rendering substitutes each placeholder with the value of its variable.
// Keys of the data that the template does not use are ignored; a variable
// with no key in the data is an error (*MissingVarError), while an empty
// string is a valid value. Values are inserted as they are: they are not
// escaped and are not themselves parsed as templates. The output is held to
// MaxBodyLen characters like a body: Render measures it before it allocates
// anything and stops counting as soon as it passes the limit
// (*TooLongError), so no data can make it use more memory than a message.
package tmpl

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits of the template language.
const (
	// MaxBodyLen is the maximum length of a template body, in characters.
	MaxBodyLen = 1600
	// MaxNameLen is the maximum length of a variable name, in bytes (names
	// are ASCII, so also in characters).
	MaxNameLen = 64
)

// Kind classifies a SyntaxError.
type Kind uint8

// The kinds of SyntaxError.
const (
	// EmptyBody means the body has no characters.
	EmptyBody Kind = iota + 1
	// BodyTooLong means the body has more than MaxBodyLen characters.
	BodyTooLong
	// InvalidUTF8 means the body is not valid UTF-8.
	InvalidUTF8
	// Unclosed means a "{{" has no "}}" after it.
	Unclosed
	// EmptyName means a placeholder holds nothing but spaces.
	EmptyName
	// InvalidName means a placeholder's name has a character that is not
	// allowed where it appears.
	InvalidName
	// NameTooLong means a placeholder's name has more than MaxNameLen
	// characters.
	NameTooLong
)

// String returns a short description of k.
func (k Kind) String() string {
	switch k {
	case EmptyBody:
		return "empty template body"
	case BodyTooLong:
		return "template body too long"
	case InvalidUTF8:
		return "invalid UTF-8"
	case Unclosed:
		return "unclosed placeholder"
	case EmptyName:
		return "empty variable name"
	case InvalidName:
		return "invalid variable name"
	case NameTooLong:
		return "variable name too long"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// SyntaxError reports why Parse rejected a template body.
type SyntaxError struct {
	// Kind says what is wrong.
	Kind Kind
	// Offset is the byte offset into the body where the problem is: the
	// start of the "{{" for Unclosed and EmptyName, the offending character
	// for InvalidName and InvalidUTF8, the start of the name for
	// NameTooLong, the first byte past the limit for BodyTooLong, and 0 for
	// EmptyBody.
	Offset int
	// Detail adds specifics, such as the offending character; it may be
	// empty.
	Detail string
}

// Error describes the problem and where it is.
func (e *SyntaxError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("tmpl: %s at byte %d", e.Kind, e.Offset)
	}
	return fmt.Sprintf("tmpl: %s at byte %d: %s", e.Kind, e.Offset, e.Detail)
}

// Describe says what is wrong and where, for the author of body (the text
// e is about): without the package's prefix, and with the position in
// characters from 1 rather than a byte offset.
func (e *SyntaxError) Describe(body string) string {
	msg := e.Kind.String()
	if e.Kind != EmptyBody {
		off := min(max(e.Offset, 0), len(body))
		msg += fmt.Sprintf(" at character %d", utf8.RuneCountInString(body[:off])+1)
	}
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

// MissingVarError is returned by Render for the first variable, in template
// order, that has no value in the data.
type MissingVarError struct {
	// Name is the variable without a value.
	Name string
}

// Error names the missing variable.
func (e *MissingVarError) Error() string {
	return fmt.Sprintf("tmpl: no value for variable %q", e.Name)
}

// TooLongError is returned by Render when the output would have more than
// Limit characters. Render finds it out before building the output.
type TooLongError struct {
	// Limit is the most characters the output may have (MaxBodyLen).
	Limit int
}

// Error says the rendered text would be too long.
func (e *TooLongError) Error() string {
	return fmt.Sprintf("the rendered text would be longer than %d characters", e.Limit)
}

// Template is a parsed template body. It is immutable, so one Template may
// be rendered from many goroutines at once. The zero Template is an empty
// template that renders to "".
type Template struct {
	// text holds the literal text around the placeholders: text[i] comes
	// before refs[i], and the final element follows the last placeholder,
	// so len(text) == len(refs)+1 for a parsed template.
	text []string
	// refs holds the variable name of each placeholder, in body order.
	refs []string
	// vars holds the distinct names in order of first use.
	vars []string
	// size is the total length of text in bytes, to size the rendered
	// output, and runes in characters, to bound it.
	size, runes int
}

// Parse checks body against the template language and returns the parsed
// template. An invalid body yields a *SyntaxError.
func Parse(body string) (*Template, error) {
	if body == "" {
		return nil, &SyntaxError{Kind: EmptyBody}
	}
	if i := invalidUTF8(body); i >= 0 {
		return nil, &SyntaxError{Kind: InvalidUTF8, Offset: i, Detail: fmt.Sprintf("byte %#02x", body[i])}
	}
	if utf8.RuneCountInString(body) > MaxBodyLen {
		return nil, &SyntaxError{
			Kind:   BodyTooLong,
			Offset: byteOffsetOfRune(body, MaxBodyLen),
			Detail: fmt.Sprintf("%d characters, limit %d", utf8.RuneCountInString(body), MaxBodyLen),
		}
	}

	t := &Template{}
	seen := make(map[string]bool)
	lit := 0 // Start of the current run of literal text.
	for {
		i := strings.Index(body[lit:], "{{")
		if i < 0 {
			break
		}
		open := lit + i
		j := strings.Index(body[open+2:], "}}")
		if j < 0 {
			return nil, &SyntaxError{Kind: Unclosed, Offset: open, Detail: `no "}}" after "{{"`}
		}
		closeAt := open + 2 + j
		name, err := parseName(body, open, closeAt)
		if err != nil {
			return nil, err
		}
		t.text = append(t.text, body[lit:open])
		t.size += open - lit
		t.refs = append(t.refs, name)
		if !seen[name] {
			seen[name] = true
			t.vars = append(t.vars, name)
		}
		lit = closeAt + 2
	}
	t.text = append(t.text, body[lit:])
	t.size += len(body) - lit
	for _, s := range t.text {
		t.runes += utf8.RuneCountInString(s)
	}
	return t, nil
}

// parseName validates the placeholder whose "{{" starts at body[open] and
// whose "}}" starts at body[closeAt], and returns its variable name.
func parseName(body string, open, closeAt int) (string, error) {
	start, end := open+2, closeAt
	for start < end && body[start] == ' ' {
		start++
	}
	for end > start && body[end-1] == ' ' {
		end--
	}
	if start == end {
		return "", &SyntaxError{Kind: EmptyName, Offset: open, Detail: fmt.Sprintf("%q", body[open:closeAt+2])}
	}
	for i := start; i < end; {
		r, size := utf8.DecodeRuneInString(body[i:])
		if !nameChar(r, i == start) {
			what := "character"
			if i == start {
				what = "first character"
			}
			return "", &SyntaxError{
				Kind:   InvalidName,
				Offset: i,
				Detail: fmt.Sprintf("%s %q not allowed in %q", what, r, body[open:closeAt+2]),
			}
		}
		i += size
	}
	if end-start > MaxNameLen {
		return "", &SyntaxError{
			Kind:   NameTooLong,
			Offset: start,
			Detail: fmt.Sprintf("%d characters, limit %d", end-start, MaxNameLen),
		}
	}
	return body[start:end], nil
}

// nameChar reports whether r may appear in a variable name, at its start if
// first is true.
func nameChar(r rune, first bool) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', r == '_':
		return true
	case '0' <= r && r <= '9', r == '-', r == '.':
		return !first
	}
	return false
}

// invalidUTF8 returns the byte offset of the first invalid UTF-8 sequence in
// s, or -1 if s is valid UTF-8.
func invalidUTF8(s string) int {
	if utf8.ValidString(s) {
		return -1
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1 // Unreachable: ValidString said there was an error.
}

// byteOffsetOfRune returns the byte offset in s of the character with index
// n (counting from 0), or len(s) if s has n or fewer characters.
func byteOffsetOfRune(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// Variables returns the distinct variable names the template uses, in order
// of first use. The slice is the caller's to keep or modify.
func (t *Template) Variables() []string {
	return append([]string(nil), t.vars...)
}

// Render returns the template with each placeholder replaced by the value of
// its variable in data. Keys of data that the template does not use are
// ignored. If a variable has no key in data, Render returns a
// *MissingVarError naming the first such variable in template order; an
// empty string counts as a value. If the output would have more than
// MaxBodyLen characters, Render returns a *TooLongError; it reads at most
// MaxBodyLen characters' worth of each value to find out, and allocates
// only once the output is known to fit.
func (t *Template) Render(data map[string]string) (string, error) {
	if len(t.refs) == 0 {
		if len(t.text) == 0 {
			return "", nil
		}
		return t.text[0], nil
	}
	for _, name := range t.refs {
		if _, ok := data[name]; !ok {
			return "", &MissingVarError{Name: name}
		}
	}
	size, runes := t.size, t.runes
	for _, name := range t.refs {
		v := data[name]
		n, ok := runesUpTo(v, MaxBodyLen-runes)
		if !ok {
			return "", &TooLongError{Limit: MaxBodyLen}
		}
		size += len(v)
		runes += n
	}
	var b strings.Builder
	b.Grow(size)
	for i, name := range t.refs {
		b.WriteString(t.text[i])
		b.WriteString(data[name])
	}
	b.WriteString(t.text[len(t.refs)])
	return b.String(), nil
}

// runesUpTo returns the number of characters in s and true when there are
// at most max of them; otherwise false, having read no further than the
// character past max.
func runesUpTo(s string, max int) (int, bool) {
	if max < 0 {
		return 0, false
	}
	if len(s) <= max { // every character has at least one byte
		return utf8.RuneCountInString(s), true
	}
	n := 0
	for range s {
		if n == max {
			return 0, false
		}
		n++
	}
	return n, true
}

// Variables parses body and returns the distinct variable names it uses, in
// order of first use. An invalid body yields a *SyntaxError.
func Variables(body string) ([]string, error) {
	t, err := Parse(body)
	if err != nil {
		return nil, err
	}
	return t.vars, nil
}
