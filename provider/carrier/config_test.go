package carrier

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const file = `{"links": [
  {"name": "carrier1", "type": "smpp", "addr": "smsc.example:2775", "system_id": "acme", "password_env": "CARRIER1_PASSWORD", "system_type": "", "tps": 50, "window": 10},
  {"name": "tw", "type": "twilio", "base_url": "https://api.twilio.com/", "account_sid": "AC123", "auth_token_env": "TW_TOKEN", "tps": 10}
]}`

func TestParseContractExample(t *testing.T) {
	env := map[string]string{"CARRIER1_PASSWORD": "pw-secret", "TW_TOKEN": "tok-secret"}
	links, err := Parse([]byte(file), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 2 {
		t.Fatalf("%d links", len(links))
	}
	s, tw := links[0], links[1]
	if s.Name != "carrier1" || s.Type != TypeSMPP || s.Addr != "smsc.example:2775" || s.TPS != 50 || s.Window != 10 ||
		s.Password.Reveal() != "pw-secret" || s.InDoubtResendAfter != 600 {
		t.Errorf("smpp link: %+v", s)
	}
	if tw.BaseURL != "https://api.twilio.com" || tw.AuthToken.Reveal() != "tok-secret" || tw.Window != DefaultWindow || tw.TPS != 10 {
		t.Errorf("twilio link: %+v", tw)
	}
	// A secret never shows, however the config is printed.
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("link", "config", s, "token", tw.AuthToken)
	b, _ := json.Marshal(links)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%+v %#v", tw, tw), string(b), logged.String()} {
		if strings.Contains(out, "secret") {
			t.Errorf("a secret shows: %s", out)
		}
	}
	// The operator commands read names and types without the secrets.
	links, err = Parse([]byte(file), nil)
	if err != nil || links[0].Password != "" {
		t.Fatalf("without getenv: %v %v", links, err)
	}
	if l, ok := Find(links, "tw"); !ok || l.Type != TypeTwilio {
		t.Fatalf("Find: %v %v", l, ok)
	}
}

// TestCheckTransport: a twilio link over plain http is refused, unless to
// loopback or allowed.
func TestCheckTransport(t *testing.T) {
	links := func(base string) []Config { return []Config{{Name: "tw", Type: TypeTwilio, BaseURL: base}} }
	if _, err := CheckTransport(links("http://api.example"), false); err == nil || !strings.Contains(err.Error(), "plain http") {
		t.Fatalf("plain http: %v", err)
	}
	if in, err := CheckTransport(links("http://api.example"), true); err != nil || len(in) != 1 {
		t.Fatalf("allowed: %v %v", in, err)
	}
	for _, ok := range []string{"https://api.twilio.com", "http://127.0.0.1:9000", "http://[::1]:9000", "http://localhost:9000"} {
		if _, err := CheckTransport(links(ok), false); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestSMPPOptions: the per-link SMPP options and their bounds.
func TestSMPPOptions(t *testing.T) {
	ok := `{"links": [{"name": "c1", "type": "smpp", "addr": "h:1", "system_id": "a", "tls": true, "enquire_link": 10, "data_coding": 1,
		"source_ton": 5, "source_npi": 0, "dest_ton": 1, "dest_npi": 1, "udh16": true}]}`
	links, err := Parse([]byte(ok), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := links[0]
	if !c.TLS || c.EnquireLink != 10 || *c.DataCoding != 1 || *c.SourceTON != 5 || *c.SourceNPI != 0 || !c.UDH16 {
		t.Fatalf("parsed %+v", c)
	}
	for field, want := range map[string]string{
		`"data_coding": 3`: "data_coding must be 0", `"source_ton": 7`: "source_ton must be", `"dest_npi": 19`: "dest_npi must be",
		`"enquire_link": -1`: "enquire_link must be", `"tls": "yes"`: `"tls"`,
	} {
		_, err := Parse([]byte(`{"links": [{"name": "c1", "type": "smpp", "addr": "h:1", "system_id": "a", `+field+`}]}`), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", field, err, want)
		}
	}
}
