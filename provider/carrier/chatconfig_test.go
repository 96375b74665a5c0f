package carrier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Chat engines in the providers file: an rbm link reads its key file from
// the path its variable names; an imessage link wants its password and a
// webhook key of 16 characters or more; what is missing is named.
func TestParseChatEngines(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(key, []byte(`{"type":"service_account"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"RBM_SA": key, "RBM_TOKEN": "tok", "BB_PW": "pw", "BB_KEY": "0123456789abcdef"}
	getenv := func(k string) string { return env[k] }
	links, err := Parse([]byte(`{"links": [
	  {"name": "rcs", "type": "rbm", "agent_id": "a1", "service_account_file_env": "RBM_SA", "webhook_client_token_env": "RBM_TOKEN"},
	  {"name": "mac", "type": "imessage", "base_url": "http://mac.local:1234/", "password_env": "BB_PW", "webhook_key_env": "BB_KEY"}]}`), getenv)
	if err != nil {
		t.Fatal(err)
	}
	r, m := links[0], links[1]
	if r.BaseURL != DefaultRBMBaseURL || r.ServiceAccount.Reveal() != `{"type":"service_account"}` || r.ClientToken.Reveal() != "tok" || !IsChatType(r.Type) {
		t.Errorf("rbm link: %+v", r)
	}
	if m.BaseURL != "http://mac.local:1234" || m.Password.Reveal() != "pw" || m.WebhookSecret.Reveal() != "0123456789abcdef" || !IsChatType(m.Type) {
		t.Errorf("imessage link: %+v", m)
	}
	for _, c := range []struct{ file, want string }{
		{`{"links": [{"name": "rcs", "type": "rbm", "service_account_file_env": "RBM_SA", "webhook_client_token_env": "RBM_TOKEN"}]}`, "agent_id is required"},
		{`{"links": [{"name": "rcs", "type": "rbm", "agent_id": "a", "service_account_file_env": "NOPE", "webhook_client_token_env": "RBM_TOKEN"}]}`, "NOPE is not set"},
		{`{"links": [{"name": "rcs", "type": "rbm", "agent_id": "a", "service_account_file_env": "BB_PW", "webhook_client_token_env": "RBM_TOKEN"}]}`, "cannot be read"},
		{`{"links": [{"name": "mac", "type": "imessage", "base_url": "http://m", "password_env": "BB_PW", "webhook_key_env": "RBM_TOKEN"}]}`, "at least 16 characters"},
		{`{"links": [{"name": "mac", "type": "imessage", "password_env": "BB_PW", "webhook_key_env": "BB_KEY"}]}`, "base_url is required"},
		{`{"links": [{"name": "mac", "type": "imessage", "base_url": "http://m", "password_env": "BB_PW", "webhook_key_env": "BB_KEY", "tps": 1}]}`, `unknown field "tps"`},
	} {
		_, err := Parse([]byte(c.file), getenv)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "0123456789abcdef") || strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want %q", c.file, err, c.want)
		}
	}
}

// tenants_may_bind marks the chat engines tenants bind themselves; a
// carrier link refuses it, saying why.
func TestTenantsMayBind(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(key, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"RBM_SA": key, "RBM_TOKEN": "tok", "BB_PW": "pw", "BB_KEY": "0123456789abcdef", "TW": "t"}
	links, err := Parse([]byte(`{"links": [
	  {"name": "rcs", "type": "rbm", "agent_id": "a1", "service_account_file_env": "RBM_SA", "webhook_client_token_env": "RBM_TOKEN", "tenants_may_bind": true},
	  {"name": "private", "type": "rbm", "agent_id": "a2", "service_account_file_env": "RBM_SA", "webhook_client_token_env": "RBM_TOKEN"},
	  {"name": "mac", "type": "imessage", "base_url": "http://mac.local:1234/", "password_env": "BB_PW", "webhook_key_env": "BB_KEY", "tenants_may_bind": true},
	  {"name": "mac2", "type": "imessage", "base_url": "http://mac.local:1234/", "password_env": "BB_PW", "webhook_key_env": "BB_KEY", "tenants_may_bind": false},
	  {"name": "tw", "type": "twilio", "base_url": "https://api.twilio.com", "account_sid": "AC1", "auth_token_env": "TW"}]}`), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	got := TenantBindable(links)
	if len(got) != 2 || got["rcs"] != TypeRBM || got["mac"] != TypeIMessage {
		t.Errorf("TenantBindable = %v, want rcs and mac", got)
	}
	for _, typ := range []string{`"type": "twilio", "base_url": "https://api.twilio.com", "account_sid": "AC1", "auth_token_env": "TW"`,
		`"type": "smpp", "addr": "smsc:2775", "system_id": "s"`} {
		_, err := Parse([]byte(`{"links": [{"name": "c", `+typ+`, "tenants_may_bind": true}]}`), func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), "tenants_may_bind is for chat engines") {
			t.Errorf("%s with tenants_may_bind: %v", typ, err)
		}
	}
	// A link set by hand (a test's) with TenantsMayBind but of a carrier
	// type is not bindable.
	if got := TenantBindable([]Config{{Name: "x", Type: TypeSMPP, TenantsMayBind: true}}); len(got) != 0 {
		t.Errorf("a carrier link is bindable: %v", got)
	}
}
