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
