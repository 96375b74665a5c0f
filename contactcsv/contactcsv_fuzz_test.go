package contactcsv

import (
	"errors"
	"testing"
	"unicode/utf8"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/phonenum"
)

// FuzzParse: whatever the file, the import parser never panics;
// it refuses the whole file with a VALIDATION_ERROR naming a field, or
// reports every data row as either a valid contact or an invalid row with
// a reason, in file order.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"phone,name\n+12125550123,Ada\n",
		"\uFEFFphone,name,plan\n+12125550123,Ada,gold\n+12125550124,,\n",
		"name,phone\nAda,+442071234567\nBob,12345\n",
		"phone\n+12125550123\n+12125550123\n",
		"phone,name\n\"+12125550123\",\"Ada, Lovelace\"\n",
		"phone,name\n+12125550123,\"unclosed\n",
		"phone,phone\n+1,+2\n",
		"name\nAda\n",
		"",
		"phone,first name\n+12125550123,x\n",
		"phone,a\n+12125550123,b,c\n",
		"phone\r\n+12125550123\r\n",
		"phone,name\n+1 (212) 555-0123,Ada\n+1 212 555 0123,Again\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		rows, err := Parse(raw, func(*sb.Contact) {})
		if err != nil {
			var e *sb.Error
			if !errors.As(err, &e) || e.Code != sb.CodeValidation {
				t.Fatalf("error %v is not a VALIDATION_ERROR", err)
			}
			if f, _ := e.Details["field"].(string); f == "" {
				t.Fatalf("VALIDATION_ERROR without details.field: %v", err)
			}
			return
		}
		last := 1
		for _, r := range rows {
			if r.Row <= last {
				t.Fatalf("row numbers out of order: %d after %d", r.Row, last)
			}
			last = r.Row
			switch {
			case r.Contact != nil:
				if r.Status != "" || r.Error != "" {
					t.Fatalf("valid row with status %q error %q", r.Status, r.Error)
				}
				if !phonenum.Valid(r.Contact.Phone) {
					t.Fatalf("accepted an invalid phone %q", r.Contact.Phone)
				}
				if utf8.RuneCountInString(r.Contact.Name) > sb.MaxContactName || len(r.Contact.Fields) > sb.MaxContactFields {
					t.Fatalf("accepted a contact over the limits")
				}
				for _, v := range r.Contact.Fields {
					if v == "" || utf8.RuneCountInString(v) > sb.MaxContactFieldValue {
						t.Fatalf("accepted a field value of %d characters", utf8.RuneCountInString(v))
					}
				}
			case r.Status != sb.ImportInvalid || r.Error == "":
				t.Fatalf("invalid row without a reason: %+v", r)
			}
		}
	})
}
