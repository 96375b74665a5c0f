// Package carrier holds what the carrier links (docs/carriers.md) have in
// common: the providers file that configures them, the Set that runs them,
// answers whether a link is up (sb.LinkState) and hands each message to the
// link of its phone, and the HTTP handler under /api/providers/NAME/ where
// links that take callbacks (Twilio's) receive them. The protocols live in
// provider/smpp and provider/twilio; this package knows neither.
package carrier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Link types: a link's phones have its type as their kind.
const (
	TypeSMPP   = "smpp"
	TypeTwilio = "twilio"
	// TypeRBM is a chat engine: an RCS Business Messaging agent
	// (docs/chat.md). Its phones send on the chat channel only.
	TypeRBM = "rbm"
	// TypeIMessage is a chat engine: a BlueBubbles server on a Mac,
	// sending iMessages (docs/chat.md).
	TypeIMessage = "imessage"
)

// IsChatType reports whether a link of type typ is a chat engine.
func IsChatType(typ string) bool { return typ == TypeRBM || typ == TypeIMessage }

// Secret is a credential read from the environment. It prints as
// "<hidden>", so that no log line or error can show it by accident.
type Secret string

func (Secret) String() string   { return "<hidden>" }
func (Secret) GoString() string { return "<hidden>" }

// Reveal returns the secret itself, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// MarshalJSON hides the secret in JSON too.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"<hidden>"`), nil }

// Config is one link of the providers file.
type Config struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// TPS caps the link's throughput, in messages (SMPP: submit_sm PDUs)
	// per second; 0 means no cap.
	TPS int `json:"tps"`
	// Window is the most requests outstanding at once: submit_sm awaiting
	// their submit_sm_resp (SMPP), or API calls in flight (Twilio).
	// Default 10.
	Window int `json:"window"`

	// SMPP.
	Addr        string `json:"addr"`
	SystemID    string `json:"system_id"`
	PasswordEnv string `json:"password_env"`
	SystemType  string `json:"system_type"`
	// InDoubtResendAfter is how long, in seconds, a submit_sm whose answer
	// was lost waits for a receipt that shows the SMSC has it before it is
	// written again (default 30; see docs/carriers.md).
	InDoubtResendAfter int `json:"in_doubt_resend_after"`
	// TLS binds over TLS (SMPP over TLS), checking the SMSC's certificate.
	TLS bool `json:"tls"`
	// EnquireLink is how often, in seconds, the link checks that the bind
	// is alive (default 30).
	EnquireLink int `json:"enquire_link"`
	// DataCoding is the SMSC's 7-bit alphabet: 0 (its default alphabet,
	// GSM 03.38, the default) or 1 (IA5, i.e. ASCII: texts all ASCII go as
	// such, one character an octet; others as UCS-2, 8).
	DataCoding *int `json:"data_coding"`
	// SourceTON, SourceNPI, DestTON and DestNPI override the addresses'
	// type of number and numbering plan (default 1 and 1: international,
	// E.164).
	SourceTON *int `json:"source_ton"`
	SourceNPI *int `json:"source_npi"`
	DestTON   *int `json:"dest_ton"`
	DestNPI   *int `json:"dest_npi"`
	// UDH16 writes 16-bit concatenation references (IEI 0x08) instead of
	// 8-bit ones.
	UDH16 bool `json:"udh16"`

	// Twilio.
	BaseURL      string `json:"base_url"`
	AccountSID   string `json:"account_sid"`
	AuthTokenEnv string `json:"auth_token_env"`

	// RBM: the agent, the environment variable naming its service
	// account's JSON key file, and the one holding the webhook's client
	// token (BaseURL is the API's, default
	// https://rcsbusinessmessaging.googleapis.com).
	AgentID               string `json:"agent_id"`
	ServiceAccountFileEnv string `json:"service_account_file_env"`
	WebhookClientTokenEnv string `json:"webhook_client_token_env"`

	// iMessage (BlueBubbles): BaseURL is the server's, PasswordEnv names
	// the variable holding its password, WebhookSecretEnv the one holding
	// the secret of the webhook URL given to it (its webhooks are not
	// signed).
	WebhookSecretEnv string `json:"webhook_key_env"`

	// TenantsMayBind, on a chat engine, lets tenants bind numbers of their
	// own to it themselves (POST /v1/phones with provider); without it only
	// the operator binds (switchboard phone add). Carrier links never take
	// it: a carrier routes texts by number, and only the operator knows
	// which numbers the carrier holds for whom.
	TenantsMayBind bool `json:"tenants_may_bind"`

	// Password (SMPP) and AuthToken (Twilio) are read from the variables
	// the file names; ServiceAccount (RBM) is the contents of the key file
	// its variable names, ClientToken (RBM) the variable's value.
	Password       Secret `json:"-"`
	AuthToken      Secret `json:"-"`
	ServiceAccount Secret `json:"-"`
	ClientToken    Secret `json:"-"`
	WebhookSecret  Secret `json:"-"`
}

// DefaultRBMBaseURL is the RBM API's address.
const DefaultRBMBaseURL = "https://rcsbusinessmessaging.googleapis.com"

// DefaultWindow is the default of Config.Window.
const DefaultWindow = 10

// DefaultInDoubtResendAfter is the default of Config.InDoubtResendAfter:
// 10 minutes, time enough for the receipt of a part the SMSC took to come
// on the next bind.
const DefaultInDoubtResendAfter = 600

// fields lists the fields each type of link may have.
var fields = map[string][]string{
	TypeSMPP: {"name", "type", "tps", "window", "addr", "system_id", "password_env", "system_type", "in_doubt_resend_after",
		"tls", "enquire_link", "data_coding", "source_ton", "source_npi", "dest_ton", "dest_npi", "udh16"},
	TypeTwilio:   {"name", "type", "tps", "window", "base_url", "account_sid", "auth_token_env"},
	TypeRBM:      {"name", "type", "window", "base_url", "agent_id", "service_account_file_env", "webhook_client_token_env", "tenants_may_bind"},
	TypeIMessage: {"name", "type", "window", "base_url", "password_env", "webhook_key_env", "tenants_may_bind"},
}

var linkName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// LoadFile reads the providers file at path (see Parse).
func LoadFile(path string, getenv func(string) string) ([]Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--providers: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("--providers: %w", err)
	}
	return Parse(b, getenv)
}

// Parse reads a providers file: {"links": [...]}, each link with the fields
// of its type. An unknown field, a missing or malformed one, a duplicate
// name, or an environment variable the file names and that is not set is an
// error of one line naming it; no error ever holds a secret. With getenv
// nil the secrets are not read, for the operator commands, which need only
// the links' names and types.
func Parse(b []byte, getenv func(string) string) ([]Config, error) {
	fail := func(format string, args ...any) ([]Config, error) {
		return nil, fmt.Errorf("providers file: "+format, args...)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return fail("not a JSON object: %s", jsonProblem(err))
	}
	for k := range top {
		if k != "links" {
			return fail("unknown field %q (the file is {\"links\": [...]})", k)
		}
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(top["links"], &raw); err != nil || top["links"] == nil {
		return fail(`"links" must be an array of links`)
	}
	var out []Config
	seen := map[string]int{}
	for i, r := range raw {
		at := fmt.Sprintf("links[%d]", i)
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(r, &keys); err != nil {
			return fail("%s: not a JSON object", at)
		}
		var c Config
		if err := json.Unmarshal(keys["name"], &c.Name); err != nil || c.Name == "" {
			return fail("%s: \"name\" is required: a string", at)
		}
		if !linkName.MatchString(c.Name) {
			return fail("%s: name %q: use 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit (it is part of the callback URLs)", at, c.Name)
		}
		at = fmt.Sprintf("links[%d] (%q)", i, c.Name)
		if j, dup := seen[c.Name]; dup {
			return fail("%s: duplicate name %q (links[%d] has it too)", at, c.Name, j)
		}
		seen[c.Name] = i
		if err := json.Unmarshal(keys["type"], &c.Type); err != nil || fields[c.Type] == nil {
			return fail("%s: \"type\" must be \"smpp\", \"twilio\", \"rbm\" or \"imessage\"", at)
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			if k == "tenants_may_bind" && !IsChatType(c.Type) {
				return fail("%s: tenants_may_bind is for chat engines (rbm, imessage): a %s link's numbers are bound by the operator", at, c.Type)
			}
			if !slices.Contains(fields[c.Type], k) {
				return fail("%s: unknown field %q for a %s link", at, k, c.Type)
			}
		}
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return fail("%s: %s", at, jsonProblem(err))
		}
		if err := c.check(getenv); err != nil {
			return fail("%s: %v", at, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// jsonProblem describes a decoding error without quoting the input.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := te.Type.String()
		if want == "int" {
			want = "whole number"
		}
		return fmt.Sprintf("field %q must be a %s", te.Field, want)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func (c *Config) check(getenv func(string) string) error {
	if c.TPS < 0 {
		return errors.New("tps must be a whole number >= 0 (0: no cap)")
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Window < 1 || c.Window > 1000 {
		return errors.New("window must be a whole number from 1 to 1000")
	}
	secret := func(field, name string, required bool) (Secret, error) {
		if name == "" {
			if required {
				return "", fmt.Errorf("%s is required: the name of the environment variable holding it", field)
			}
			return "", nil
		}
		if getenv == nil {
			return "", nil // names and types only: the secrets are not read
		}
		v := getenv(name)
		if v == "" {
			return "", fmt.Errorf("%s: the environment variable %s is not set", field, name)
		}
		return Secret(v), nil
	}
	var err error
	switch c.Type {
	case TypeSMPP:
		if c.Addr == "" {
			return errors.New("addr is required: the SMSC's host:port")
		}
		if _, port, e := net.SplitHostPort(c.Addr); e != nil || port == "" {
			return fmt.Errorf("addr %q: want host:port, e.g. smsc.example:2775", c.Addr)
		}
		if c.SystemID == "" || len(c.SystemID) > 15 {
			return errors.New("system_id is required: 1 to 15 characters (SMPP 3.4)")
		}
		if len(c.SystemType) > 12 {
			return errors.New("system_type: at most 12 characters (SMPP 3.4)")
		}
		if c.InDoubtResendAfter < 0 {
			return errors.New("in_doubt_resend_after must be a whole number of seconds >= 0")
		}
		if c.InDoubtResendAfter == 0 {
			c.InDoubtResendAfter = DefaultInDoubtResendAfter
		}
		if c.EnquireLink < 0 || c.EnquireLink > 3600 {
			return errors.New("enquire_link must be a whole number of seconds from 1 to 3600 (0 or absent: 30)")
		}
		if c.DataCoding != nil && *c.DataCoding != 0 && *c.DataCoding != 1 {
			return errors.New("data_coding must be 0 (the SMSC's default alphabet, GSM 03.38) or 1 (IA5/ASCII)")
		}
		for _, f := range []struct {
			name string
			v    *int
			max  int
		}{{"source_ton", c.SourceTON, 6}, {"source_npi", c.SourceNPI, 18}, {"dest_ton", c.DestTON, 6}, {"dest_npi", c.DestNPI, 18}} {
			if f.v != nil && (*f.v < 0 || *f.v > f.max) {
				return fmt.Errorf("%s must be a whole number from 0 to %d (SMPP 3.4 5.2.5, 5.2.6)", f.name, f.max)
			}
		}
		c.Password, err = secret("password_env", c.PasswordEnv, false)
	case TypeTwilio:
		u, e := url.Parse(c.BaseURL)
		if c.BaseURL == "" || e != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return errors.New("base_url is required: an absolute http(s) URL such as https://api.twilio.com")
		}
		c.BaseURL = strings.TrimSuffix(c.BaseURL, "/")
		if c.AccountSID == "" {
			return errors.New("account_sid is required")
		}
		c.AuthToken, err = secret("auth_token_env", c.AuthTokenEnv, true)
	case TypeRBM:
		if c.BaseURL == "" {
			c.BaseURL = DefaultRBMBaseURL
		}
		u, e := url.Parse(c.BaseURL)
		if e != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return errors.New("base_url: an absolute http(s) URL such as " + DefaultRBMBaseURL)
		}
		c.BaseURL = strings.TrimSuffix(c.BaseURL, "/")
		if c.AgentID == "" {
			return errors.New("agent_id is required: the RBM agent's id")
		}
		var path Secret
		if path, err = secret("service_account_file_env", c.ServiceAccountFileEnv, true); err != nil {
			return err
		}
		if path != "" {
			b, e := os.ReadFile(path.Reveal())
			if e != nil {
				return fmt.Errorf("service_account_file_env: the key file named by %s cannot be read: %v", c.ServiceAccountFileEnv, errors.Unwrap(e))
			}
			c.ServiceAccount = Secret(b)
		}
		c.ClientToken, err = secret("webhook_client_token_env", c.WebhookClientTokenEnv, true)
	case TypeIMessage:
		u, e := url.Parse(c.BaseURL)
		if c.BaseURL == "" || e != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return errors.New("base_url is required: the BlueBubbles server's address, such as http://mac.example:1234")
		}
		c.BaseURL = strings.TrimSuffix(c.BaseURL, "/")
		if c.Password, err = secret("password_env", c.PasswordEnv, true); err != nil {
			return err
		}
		c.WebhookSecret, err = secret("webhook_key_env", c.WebhookSecretEnv, true)
		if err == nil && getenv != nil && len(c.WebhookSecret.Reveal()) < 16 {
			err = errors.New("webhook_key_env: the secret must be at least 16 characters (it is all that guards the webhook URL)")
		}
	}
	return err
}

// CheckTransport refuses a twilio link whose base_url is plain http to a
// host other than this machine's loopback: its auth token would cross the
// network in clear. allowInsecure (serve --allow-insecure-providers)
// allows it, for a mock on another host. It returns the links that use
// plain http, for a warning.
func CheckTransport(links []Config, allowInsecure bool) (insecure []string, err error) {
	for i, c := range links {
		if c.Type != TypeTwilio {
			continue
		}
		u, e := url.Parse(c.BaseURL)
		if e != nil || u.Scheme != "http" {
			continue
		}
		if isLoopback(u.Hostname()) {
			continue
		}
		if !allowInsecure {
			return nil, fmt.Errorf("providers file: links[%d] (%q): base_url %s is plain http: the auth token would cross the network in clear; use https, or serve --allow-insecure-providers (a mock on another host)", i, c.Name, c.BaseURL)
		}
		insecure = append(insecure, c.Name)
	}
	return insecure, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TenantBindable returns the chat engines of links that tenants may bind
// themselves (TenantsMayBind), by name: their types.
func TenantBindable(links []Config) map[string]string {
	out := map[string]string{}
	for _, l := range links {
		if l.TenantsMayBind && IsChatType(l.Type) {
			out[l.Name] = l.Type
		}
	}
	return out
}

// Find returns the link of the file named name.
func Find(links []Config, name string) (Config, bool) {
	for _, l := range links {
		if l.Name == name {
			return l, true
		}
	}
	return Config{}, false
}
