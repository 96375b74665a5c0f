package main

// The receiver snippets of docs/webhooks.md live in docs/examples: this test
// checks that the doc shows each file verbatim and runs each one (Go in
// process; Node.js, Python and the shell one-liner as programs, skipped when
// the interpreter is missing) against a real delivery signed by the code
// that signs deliveries.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/docs/examples"
	"github.com/switchboard/switchboard/webhook/sign"
)

func TestWebhookDocExamples(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("../../docs/examples")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"verify.go", "verify.js", "verify.py", "verify.sh", "verify_standard.py", "standardwebhooks.js"} {
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), strings.TrimRight(string(src), "\n")) {
			t.Errorf("docs/webhooks.md does not show docs/examples/%s verbatim", name)
		}
	}

	// A real delivery: the payload, the signatures and the headers exactly
	// as the dispatcher makes them.
	const secret = "my-webhook-secret-0123456789"
	body := sb.NewEventPayload(sb.EventReceived, &sb.Message{ID: sb.NewID(), From: "+15005550123", To: "+15550100001",
		Channel: sb.ChannelSMS, Body: `Hi! "quoted" & ünïcode`}, time.Now())
	h := http.Header{}
	sign.Headers(h, []byte(secret), sb.NewID(), sb.EventReceived, time.Now(), body)
	signature := h.Get(sign.HeaderSignature)
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-2] ^= 1
	bodyFile := filepath.Join(t.TempDir(), "body.json")
	tamperedFile := filepath.Join(t.TempDir(), "tampered.json")
	os.WriteFile(bodyFile, body, 0o600)
	os.WriteFile(tamperedFile, tampered, 0o600)

	t.Run("go", func(t *testing.T) {
		if !examples.VerifySignature(body, signature, secret) || examples.VerifySignature(tampered, signature, secret) ||
			examples.VerifySignature(body, signature, secret+"x") {
			t.Error("VerifySignature does not tell the real delivery from the altered ones")
		}
		var got []byte
		handler := examples.Handler(secret, func(event []byte) error { got = event; return nil })
		for _, c := range []struct {
			body   []byte
			status int
		}{{body, http.StatusNoContent}, {tampered, http.StatusUnauthorized}} {
			req := httptest.NewRequest("POST", "/webhooks/switchboard", strings.NewReader(string(c.body)))
			req.Header = h.Clone()
			rec := httptest.NewRecorder()
			handler(rec, req)
			if rec.Code != c.status {
				t.Errorf("Handler answered %d, want %d", rec.Code, c.status)
			}
		}
		if string(got) != string(body) {
			t.Errorf("Handler passed on %q", got)
		}
	})

	// run runs an interpreter and returns what it printed.
	run := func(t *testing.T, env []string, name string, args ...string) string {
		t.Helper()
		if _, err := exec.LookPath(name); err != nil {
			t.Skipf("%s is not installed", name)
		}
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	env := []string{"SIGNATURE=" + signature, "WEBHOOK_SECRET=" + secret, "EXAMPLES=" + dir}

	t.Run("node", func(t *testing.T) {
		const script = `const fs = require("fs");
const { verifySignature } = require(process.env.EXAMPLES + "/verify.js");
const check = (f) => verifySignature(fs.readFileSync(f), process.env.SIGNATURE, process.env.WEBHOOK_SECRET);
console.log(check(process.argv[1]), check(process.argv[2]));`
		if out := run(t, env, "node", "-e", script, bodyFile, tamperedFile); out != "true false" {
			t.Errorf("verify.js: real delivery, altered delivery: %s, want true false", out)
		}
	})

	t.Run("python", func(t *testing.T) {
		const script = `import os, sys
sys.path.insert(0, os.environ["EXAMPLES"])
from verify import verify_signature
check = lambda f: verify_signature(open(f, "rb").read(), os.environ["SIGNATURE"], os.environ["WEBHOOK_SECRET"])
print(check(sys.argv[1]), check(sys.argv[2]))`
		if out := run(t, env, "python3", "-c", script, bodyFile, tamperedFile); out != "True False" {
			t.Errorf("verify.py: real delivery, altered delivery: %s, want True False", out)
		}
	})

	t.Run("openssl", func(t *testing.T) {
		if _, err := exec.LookPath("openssl"); err != nil {
			t.Skip("openssl is not installed")
		}
		script := filepath.Join(dir, "verify.sh")
		env := []string{"SIGNATURE=" + signature, "SECRET=" + secret}
		if out := run(t, append(env, "BODY="+string(body)), "sh", script); out != "signature ok" {
			t.Errorf("verify.sh on the real delivery: %s", out)
		}
		if out := run(t, append(env, "BODY="+string(tampered)), "sh", script); out != "signature MISMATCH" {
			t.Errorf("verify.sh on an altered delivery: %s", out)
		}
	})

	// During a secret rotation: both the new and the old secret verify the
	// delivery with each snippet, a third one does not.
	const newSecret, thirdSecret = "my-new-webhook-secret-0123456789", "not-my-webhook-secret-0123456789"
	rotated := http.Header{}
	sign.HeadersRotating(rotated, [][]byte{[]byte(newSecret), []byte(secret)}, sb.NewID(), sb.EventReceived, time.Now(), body)
	t.Run("rotation", func(t *testing.T) {
		sig := rotated.Get(sign.HeaderSignature)
		if !strings.Contains(sig, ", ") {
			t.Fatalf("a rotated X-Service-Signature with one value: %q", sig)
		}
		for _, c := range []struct {
			secret string
			want   bool
		}{{secret, true}, {newSecret, true}, {thirdSecret, false}} {
			if got := examples.VerifySignature(body, sig, c.secret); got != c.want {
				t.Errorf("verify.go with %q: %v, want %v", c.secret, got, c.want)
			}
			env := []string{"SIGNATURE=" + sig, "WEBHOOK_SECRET=" + c.secret, "EXAMPLES=" + dir}
			if _, err := exec.LookPath("node"); err == nil {
				const script = `const fs = require("fs");
const { verifySignature } = require(process.env.EXAMPLES + "/verify.js");
console.log(verifySignature(fs.readFileSync(process.argv[1]), process.env.SIGNATURE, process.env.WEBHOOK_SECRET));`
				if out := run(t, env, "node", "-e", script, bodyFile); out != fmt.Sprint(c.want) {
					t.Errorf("verify.js with %q: %s, want %v", c.secret, out, c.want)
				}
			}
			if _, err := exec.LookPath("python3"); err == nil {
				const script = `import os, sys
sys.path.insert(0, os.environ["EXAMPLES"])
from verify import verify_signature
print(verify_signature(open(sys.argv[1], "rb").read(), os.environ["SIGNATURE"], os.environ["WEBHOOK_SECRET"]))`
				want := map[bool]string{true: "True", false: "False"}[c.want]
				if out := run(t, env, "python3", "-c", script, bodyFile); out != want {
					t.Errorf("verify.py with %q: %s, want %s", c.secret, out, want)
				}
			}
			if _, err := exec.LookPath("openssl"); err == nil {
				want := map[bool]string{true: "signature ok", false: "signature MISMATCH"}[c.want]
				shEnv := []string{"SIGNATURE=" + sig, "SECRET=" + c.secret, "BODY=" + string(body)}
				if out := run(t, shEnv, "sh", filepath.Join(dir, "verify.sh")); out != want {
					t.Errorf("verify.sh with %q: %s, want %s", c.secret, out, want)
				}
			}
		}
	})

	standard := append(env, "WEBHOOK_ID="+h.Get(sign.HeaderStandardID), "WEBHOOK_TIMESTAMP="+h.Get(sign.HeaderStandardTimestamp),
		"WEBHOOK_SIGNATURE="+h.Get(sign.HeaderStandardSignature))

	t.Run("python standard webhooks", func(t *testing.T) {
		const script = `import os, sys
sys.path.insert(0, os.environ["EXAMPLES"])
from verify_standard import verify_standard
headers = {k: os.environ[k.upper().replace("-", "_")] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")}
check = lambda f, h: verify_standard(open(f, "rb").read(), h, os.environ["WEBHOOK_SECRET"])
old = dict(headers, **{"webhook-timestamp": str(int(headers["webhook-timestamp"]) - 600)})
print(check(sys.argv[1], headers), check(sys.argv[2], headers), check(sys.argv[1], old))`
		if out := run(t, standard, "python3", "-c", script, bodyFile, tamperedFile); out != "True False False" {
			t.Errorf("verify_standard.py: real delivery, altered delivery, old timestamp: %s, want True False False", out)
		}
		// A rotated delivery, with the old secret, the new one, a third.
		const rotatedScript = `import os, sys
sys.path.insert(0, os.environ["EXAMPLES"])
from verify_standard import verify_standard
headers = {k: os.environ[k.upper().replace("-", "_")] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")}
print(*(verify_standard(open(sys.argv[1], "rb").read(), headers, s) for s in sys.argv[2:]))`
		renv := append(env, "WEBHOOK_ID="+rotated.Get(sign.HeaderStandardID), "WEBHOOK_TIMESTAMP="+rotated.Get(sign.HeaderStandardTimestamp),
			"WEBHOOK_SIGNATURE="+rotated.Get(sign.HeaderStandardSignature))
		if out := run(t, renv, "python3", "-c", rotatedScript, bodyFile, secret, newSecret, thirdSecret); out != "True True False" {
			t.Errorf("verify_standard.py on a rotated delivery, old, new and third secret: %s, want True True False", out)
		}
	})

	// The library is not vendored: this runs where NODE_PATH (or a
	// node_modules folder) provides the npm package standardwebhooks.
	t.Run("node standardwebhooks library", func(t *testing.T) {
		if _, err := exec.LookPath("node"); err != nil {
			t.Skip("node is not installed")
		}
		if err := exec.Command("node", "-e", `require.resolve("standardwebhooks")`).Run(); err != nil {
			t.Skip("the npm package standardwebhooks is not installed")
		}
		const script = `const fs = require("fs");
const { verifyStandard } = require(process.env.EXAMPLES + "/standardwebhooks.js");
const headers = { "webhook-id": process.env.WEBHOOK_ID, "webhook-timestamp": process.env.WEBHOOK_TIMESTAMP, "webhook-signature": process.env.WEBHOOK_SIGNATURE };
const check = (f) => { try { return verifyStandard(fs.readFileSync(f, "utf8"), headers).message_id; } catch (e) { return "rejected"; } };
console.log(check(process.argv[1]), check(process.argv[2]));`
		var p struct {
			MessageID string `json:"message_id"`
		}
		json.Unmarshal(body, &p)
		if out := run(t, standard, "node", "-e", script, bodyFile, tamperedFile); out != p.MessageID+" rejected" {
			t.Errorf("standardwebhooks.js: real delivery, altered delivery: %s, want %s rejected", out, p.MessageID)
		}
	})
}
