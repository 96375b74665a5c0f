package httpapi

import (
	"reflect"
	"testing"
)

var sendFastSeeds = []string{
	`{"to":"+15005550006","body":"Your order has shipped","channel":"auto"}`,
	" {\n\t\"to\" : \"+15005550006\" ,\r\"body\":\"héllo 😀\" } ",
	`{"to":"+15005550006","template":"welcome","from":"+15550000001"}`,
	`{"to":"+15005550006","template":"welcome","data":{"name":"Ada"}}`,
	`{"to":"+15005550006","body":"a\"b"}`,
	`{"to":"+15005550006","body":"a\u0041"}`,
	"{\"to\":\"+15005550006\",\"body\":\"\xff\"}",
	"{\"to\":\"+15005550006\",\"body\":\"a\tb\"}",
	`{"to":"+1","to":"+2"}`,
	`{"To":"+15005550006"}`,
	`{"to":null,"body":"x"}`,
	`{"to":5}`,
	`{"to":"x","extra":"y"}`,
	`{"to":"x",}`,
	`{"to":"x"} {}`,
	`{"to":"x"`,
	`{}`,
	`[]`,
	``,
	`null`,
}

// TestSendFast pins which bodies take the fast path: the plain ones do, and
// each kind of body that needs encoding/json's decoding or its errors does
// not.
func TestSendFast(t *testing.T) {
	for i, body := range sendFastSeeds {
		var req sendRequest
		got := sendFast([]byte(body), &req)
		if want := i < 3; got != want {
			t.Errorf("sendFast(%q) = %v, want %v", body, got, want)
		}
		if !got && !reflect.DeepEqual(req, sendRequest{}) {
			t.Errorf("sendFast(%q) refused the body but set %s", body, show(req))
		}
	}
	var req sendRequest
	if !sendFast([]byte(sendFastSeeds[1]), &req) || *req.To != "+15005550006" || *req.Body != "héllo 😀" || req.Channel != nil {
		t.Fatalf("sendFast read %+v", req)
	}
}

// FuzzSendFast: whenever sendFast accepts a body, decodeBytes accepts it too
// and reads the same request.
func FuzzSendFast(f *testing.F) {
	for _, s := range sendFastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast sendRequest
		if !sendFast(raw, &fast) {
			return
		}
		var slow sendRequest
		if err := decodeBytes(raw, &slow); err != nil {
			t.Fatalf("sendFast accepted %q, decodeBytes refused it: %v", raw, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: sendFast read %s, decodeBytes %s", raw, show(fast), show(slow))
		}
	})
}

func show(r sendRequest) string {
	s := ""
	for _, f := range []struct {
		name string
		v    *string
	}{{"to", r.To}, {"body", r.Body}, {"template", r.Template}, {"channel", r.Channel}, {"from", r.From}} {
		if f.v != nil {
			s += f.name + "=" + *f.v + " "
		}
	}
	return s
}

func BenchmarkDecodeSend(b *testing.B) {
	raw := []byte(sendFastSeeds[0])
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var req sendRequest
			if err := decodeSend(raw, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var req sendRequest
			if err := decodeBytes(raw, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
