package smpp

import (
	"strings"
	"testing"

	sb "github.com/switchboard/switchboard"
)

func TestParseReceipt(t *testing.T) {
	cases := []struct {
		text string
		want Receipt
	}{
		{"id:0123456789 sub:001 dlvrd:001 submit date:2401011200 done date:2401011201 stat:DELIVRD err:000 text:Hello world",
			Receipt{ID: "0123456789", Sub: "001", Dlvrd: "001", SubmitDate: "2401011200", DoneDate: "2401011201", Stat: "DELIVRD", Err: "000", Text: "Hello world"}},
		{"ID:abc-9 SUB:001 DLVRD:000 SUBMIT DATE:2401011200 DONE DATE:2401011201 STAT:undeliv ERR:005 Text:",
			Receipt{ID: "abc-9", Sub: "001", Dlvrd: "000", SubmitDate: "2401011200", DoneDate: "2401011201", Stat: "UNDELIV", Err: "005"}},
		{"stat:EXPIRED id:77 err:0", Receipt{ID: "77", Stat: "EXPIRED", Err: "0"}},
		{"id:1 text:stat:DELIVRD in the text", Receipt{ID: "1", Text: "stat:DELIVRD in the text"}},
		{"id:1  stat:REJECTD   err:011", Receipt{ID: "1", Stat: "REJECTD", Err: "011"}},
		{"valid:1 id:2", Receipt{ID: "2"}}, // "id:" inside a word is not the id
	}
	for _, tc := range cases {
		got, ok := ParseReceipt(tc.text)
		if !ok || got != tc.want {
			t.Errorf("ParseReceipt(%q) = %+v, %v; want %+v", tc.text, got, ok, tc.want)
		}
	}
	if _, ok := ParseReceipt("Hello, this is a text"); ok {
		t.Error("a plain text parsed as a receipt")
	}
}

func TestReceiptOutcome(t *testing.T) {
	for stat, want := range map[string]int{
		"DELIVRD": sb.ReceiptDelivered,
		"UNDELIV": sb.ReceiptFailed, "REJECTD": sb.ReceiptFailed, "EXPIRED": sb.ReceiptFailed, "DELETED": sb.ReceiptFailed, "UNKNOWN": sb.ReceiptFailed,
		"ENROUTE": sb.ReceiptPending, "ACCEPTD": sb.ReceiptPending, "SOMETHING": sb.ReceiptPending,
	} {
		state, reason, _ := Receipt{Stat: stat, Err: "042"}.Outcome()
		if state != want {
			t.Errorf("stat %s: state %d, want %d", stat, state, want)
		}
		if want == sb.ReceiptFailed && !strings.HasPrefix(reason, "SMPP receipt stat:"+stat+" err:042 (") {
			t.Errorf("stat %s: reason %q", stat, reason)
		}
		if want != sb.ReceiptFailed && reason != "" {
			t.Errorf("stat %s: reason %q", stat, reason)
		}
	}
}

func TestAltIDs(t *testing.T) {
	if got := altIDs("255"); len(got) < 1 || got[0] != "FF" {
		t.Errorf("altIDs(255) = %v", got)
	}
	if got := altIDs("FF"); len(got) != 1 || got[0] != "255" {
		t.Errorf("altIDs(FF) = %v", got)
	}
	if got := altIDs("msg-1"); len(got) != 0 {
		t.Errorf("altIDs(msg-1) = %v", got)
	}
}

func TestNormID(t *testing.T) {
	for in, want := range map[string]string{
		"0000123456": "123456", "123456": "123456", "ab12cd\x00": "AB12CD", " 00Ab ": "AB", "0000000000": "0", "": "",
	} {
		if got := normID(in); got != want {
			t.Errorf("normID(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzNormID: normalising is idempotent, and two ids that differ only in
// case and leading zeros normalise alike.
func FuzzNormID(f *testing.F) {
	for _, s := range []string{"0000123456", "ab12", "00", "x-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		n := normID(id)
		if normID(n) != n {
			t.Fatalf("normID(%q) = %q, normID of that %q", id, n, normID(n))
		}
		if n != "" && n != "0" && normID("000"+strings.ToLower(id)) != normID(strings.ToUpper(id)) && !strings.ContainsAny(id, " \t\r\n\x00") && isASCII(id) {
			t.Fatalf("%q: padded lower %q, upper %q", id, normID("000"+strings.ToLower(id)), normID(strings.ToUpper(id)))
		}
		altIDs(n)
	})
}

func FuzzParseReceipt(f *testing.F) {
	for _, s := range []string{
		"id:0123456789 sub:001 dlvrd:001 submit date:2401011200 done date:2401011201 stat:DELIVRD err:000 text:Hello",
		"id: stat: err:", "text:", "ID:x STAT:y", "id:1\tstat:DELIVRD\nerr:0", "submit date:",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, ok := ParseReceipt(text)
		if ok != (r.ID != "" || r.Stat != "") {
			t.Fatalf("ok %v for %+v", ok, r)
		}
		for _, v := range []string{r.ID, r.Stat, r.Err, r.Sub, r.Dlvrd} {
			if strings.ContainsAny(v, " \t\r\n") {
				t.Fatalf("a one-word field holds a space: %+v", r)
			}
			if !strings.Contains(text, v) && !strings.Contains(strings.ToUpper(text), v) {
				t.Fatalf("a field %q that is not in the text", v)
			}
		}
		state, reason, _ := r.Outcome()
		if (state == sb.ReceiptFailed) != (reason != "") {
			t.Fatalf("state %d with reason %q", state, reason)
		}
		if state == sb.ReceiptFailed && !strings.Contains(reason, "stat:"+strings.ToUpper(strings.TrimSpace(r.Stat))) {
			t.Fatalf("reason %q without the stat", reason)
		}
	})
}
