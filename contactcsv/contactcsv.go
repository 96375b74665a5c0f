// Package contactcsv reads the CSV file of a contact import (README
// "Contacts"): a header row naming a phone column, optionally name, and any
// other columns, which become fields. Phones are E.164, written with or
// without the spaces, dashes, dots and brackets a spreadsheet adds. The API's import route and the
// dashboard's import form both read files with it, so a file imports the same
// way through either. It does not store anything.
package contactcsv

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/phonenum"
)

// Limits of an import file.
const (
	MaxBytes = 10 << 20
	MaxRows  = 100_000
)

// fieldName is the rule for a contact field's key: a template variable name.
var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)

// CheckFieldName returns a VALIDATION_ERROR on field unless key can name a
// contact field.
func CheckFieldName(field, key string) error {
	if !fieldName.MatchString(key) {
		return sb.Invalid(field, "%q is not a valid field name: 1 to 64 letters, digits, _, - and ., starting with a letter or _.", key)
	}
	return nil
}

// FieldTooLong is the reason given for a field value over the limit.
func FieldTooLong(field string) string {
	return fmt.Sprintf("%s must be at most %d characters.", field, sb.MaxContactFieldValue)
}

// Parse reads an import file into rows; init completes each
// valid row's contact. A file whose header is unusable, that is not CSV or
// that has too many rows is a VALIDATION_ERROR; a row that is wrong is an
// invalid row.
func Parse(raw []byte, init func(*sb.Contact)) ([]*sb.ImportRow, error) {
	raw = bytes.TrimPrefix(raw, []byte("\uFEFF")) // a spreadsheet's byte order mark
	cr := csv.NewReader(bytes.NewReader(raw))
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err == io.EOF {
		return nil, sb.Invalid("body", "The file is empty: a header row with a phone column is required.")
	}
	if err != nil {
		return nil, csvError(err)
	}
	phoneCol, nameCol := -1, -1
	seen := map[string]bool{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		header[i] = h
		key := strings.ToLower(h)
		if seen[key] {
			return nil, sb.Invalid("header", "The column %q appears twice.", h)
		}
		seen[key] = true
		switch key {
		case "phone":
			phoneCol = i
		case "name":
			nameCol = i
		default:
			if err := CheckFieldName("header", h); err != nil {
				return nil, err
			}
		}
	}
	if phoneCol < 0 {
		return nil, sb.Invalid("header", "The header row must have a phone column.")
	}
	fieldCols := len(header) - 1
	if nameCol >= 0 {
		fieldCols--
	}
	if n := fieldCols; n > sb.MaxContactFields {
		return nil, sb.Invalid("header", "A contact has at most %d fields; the file has %d field columns.", sb.MaxContactFields, n)
	}
	var rows []*sb.ImportRow
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(err)
		}
		if len(rows) == MaxRows {
			return nil, sb.Invalid("body", "A file may have at most %d rows.", MaxRows)
		}
		line, _ := cr.FieldPos(0)
		row := &sb.ImportRow{Row: line}
		rows = append(rows, row)
		if len(rec) != len(header) {
			row.Status, row.Error = sb.ImportInvalid, fmt.Sprintf("The row has %d columns; the header has %d.", len(rec), len(header))
			continue
		}
		c, msg := contactFromRecord(header, rec, phoneCol, nameCol)
		if msg != "" {
			row.Status, row.Error = sb.ImportInvalid, msg
			continue
		}
		init(c)
		row.Contact = c
	}
	return rows, nil
}

// contactFromRecord returns the contact of one CSV record, or why it is
// invalid. Empty cells give no field.
func contactFromRecord(header, rec []string, phoneCol, nameCol int) (*sb.Contact, string) {
	phone, ok := phonenum.Compact(rec[phoneCol])
	if !ok {
		return nil, fmt.Sprintf("phone %s is not an E.164 number: + and 10 to 15 digits, the country code first (spaces, dashes, dots and brackets between them are fine).",
			quoteClipped(strings.TrimSpace(rec[phoneCol]), 40))
	}
	c := &sb.Contact{Phone: phone, Fields: map[string]string{}}
	for i, v := range rec {
		switch {
		case i == phoneCol:
		case i == nameCol:
			c.Name = strings.TrimSpace(v)
			if utf8.RuneCountInString(c.Name) > sb.MaxContactName {
				return nil, fmt.Sprintf("name must be at most %d characters.", sb.MaxContactName)
			}
		case v != "":
			if utf8.RuneCountInString(v) > sb.MaxContactFieldValue {
				return nil, FieldTooLong(header[i])
			}
			c.Fields[header[i]] = v
		}
	}
	return c, ""
}

// quoteClipped quotes s for a message, cut to at most n characters.
func quoteClipped(s string, n int) string {
	if s == "" {
		return "(empty)"
	}
	if r := []rune(s); len(r) > n {
		return strconv.Quote(string(r[:n])) + "…"
	}
	return strconv.Quote(s)
}

func csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return sb.Invalid("body", "The file is not valid CSV (line %d): %v.", pe.Line, pe.Err)
	}
	return sb.Invalid("body", "The file is not valid CSV.")
}
