package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/android-sms-gateway/client-go/smsgateway"

	"github.com/switchboard/switchboard/provider/android/agent"
)

// phoneAgentCmd runs a reference device: it pairs with a code (or reuses
// the pairing kept in --state), takes and "sends" the messages of its
// phone, pings its health, and turns each line "NUMBER TEXT" on stdin into
// a text the phone receives from NUMBER; a line starting with ! is a
// command (agentCommand).
func phoneAgentCmd(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("phone-agent", getenv, stdout)
	f.synopsis = "--url URL --code CODE [--state FILE]"
	f.about = `Pairs with the code as the Android app would, then "sends" the messages its phone is given and prints
each one as a JSON line. With --state, it keeps the pairing in FILE: started again with --state FILE
alone, it reuses the pairing and its URL.

Typed on its standard input, one a line:
  NUMBER TEXT                   the phone receives TEXT from NUMBER (E.164), as a text a person
                                sent it; e.g. +15557654321 STOP opts that number out
  !battery N [charging]         the battery level (0 to 100) its pings report, and a ping now
  !network wifi|cellular|none   the network its pings report, and a ping now
  !fail on|off                  every send fails (a SIM its carrier blocks), or none does
  !pause on|off                 the messages it takes wait Pending on the phone (a canceled
                                campaign's are withdrawn from it then), or go to the radio
  !ping                         a health ping now`
	url := f.string("url", "", "the device API: https://HOST/api/mobile/v1 (required unless --state holds a pairing: then its URL)")
	code := f.string("code", "", "the pairing code of POST /v1/phones (required unless --state holds a pairing)")
	state := f.string("state", "", "a file that keeps the pairing (and the URL), so that the agent can be restarted without a new code")
	name := f.string("name", "Switchboard phone-agent", "the device name")
	failShare := f.float("fail-share", 0, "share of messages (0 to 1) that fail to send")
	insecure := f.bool("insecure", false, "accept any TLS certificate (a self-signed one on a trial server)")
	dropSent := f.bool("drop-sent", false, "never report Sent, as the app does when Android's sent broadcast reaches it without its uri (Processed and Delivered are reported)")
	silentAfter := f.string("silent-after", "", "go silent (no request, no event stream) once a message is reported in this state, e.g. Processed: a phone whose data connection drops right after sending")
	battery := f.int("battery", 100, "the battery level (percent) its pings report; change it with !battery N on stdin")
	pingEvery := f.duration("ping-every", time.Minute, "how often it pings its health (system:ping), as the app at its ping setting; 0: never")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if *url == "" {
		st, err := readAgentState(*state)
		if err != nil {
			return err
		}
		if st == nil || st.URL == "" {
			return errors.New("phone-agent: --url is required (https://HOST/api/mobile/v1), unless --state names the file of an earlier pairing")
		}
		*url = st.URL
	}
	if err := checkAgentURL(*url); err != nil {
		return err
	}
	if *battery < 0 || *battery > 100 || *pingEvery < 0 {
		return errors.New("phone-agent: --battery must be 0 to 100 and --ping-every not negative")
	}
	if *failShare < 0 || *failShare > 1 {
		return errors.New("phone-agent: --fail-share must be between 0 and 1")
	}
	switch smsgateway.ProcessingState(*silentAfter) {
	case "", smsgateway.ProcessingStateProcessed, smsgateway.ProcessingStateSent, smsgateway.ProcessingStateDelivered, smsgateway.ProcessingStateFailed:
	default:
		return fmt.Errorf("phone-agent: --silent-after must be Processed, Sent, Delivered or Failed, not %q", *silentAfter)
	}
	var mu sync.Mutex
	out := json.NewEncoder(stdout)
	print := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		out.Encode(v)
	}
	opt := agent.Options{URL: *url, Name: *name, FailShare: *failShare, DropSent: *dropSent, SilentAfter: smsgateway.ProcessingState(*silentAfter),
		PingEvery: *pingEvery, Battery: max(*battery, 1),
		OnMessage: func(m smsgateway.MobileMessage) {
			text := ""
			if m.TextMessage != nil {
				text = m.TextMessage.Text
			}
			print(map[string]any{"sent": m.ID, "to": m.PhoneNumbers, "text": text})
		},
		OnCancel: func(id string) { print(map[string]string{"canceled": id}) }}
	if *insecure {
		opt.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	}
	a, err := loadAgent(ctx, opt, *code, *state)
	if err != nil {
		return err
	}
	print(map[string]string{"device_id": a.ID, "phone_id": a.Login, "status": "paired"})
	go func() { // stdin: NUMBER TEXT, one text a line
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "!") {
				if err := agentCommand(ctx, a, line); err != nil {
					fmt.Fprintln(stderr, "phone-agent:", err)
					continue
				}
				print(map[string]string{"done": line})
				continue
			}
			from, text, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
			if !ok || text == "" {
				fmt.Fprintln(stderr, "phone-agent: write NUMBER TEXT to receive a text")
				continue
			}
			if _, err := a.Inbound(ctx, from, text); err != nil {
				fmt.Fprintln(stderr, "phone-agent: inbound:", err)
				continue
			}
			print(map[string]string{"received_from": from, "text": text})
		}
	}()
	err = a.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("phone-agent: %w", err)
}

// agentCommand runs a command line of the agent's input:
//
//	!battery N [charging]   the battery its pings report (and pings now)
//	!network wifi|cellular|none
//	!fail on|off            every send fails (a SIM its carrier blocks), or none
//	!pause on|off           messages wait Pending on the phone, or go out
//	!ping                   ping now
func agentCommand(ctx context.Context, a *agent.Agent, line string) error {
	f := strings.Fields(strings.TrimPrefix(line, "!"))
	if len(f) == 0 {
		return errors.New("commands: !battery N [charging], !network wifi|cellular|none, !fail on|off, !pause on|off, !ping")
	}
	switch {
	case f[0] == "battery" && len(f) >= 2:
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 0 || n > 100 {
			return errors.New("!battery takes a level from 0 to 100")
		}
		a.SetBattery(n, len(f) > 2 && f[2] == "charging")
	case f[0] == "network" && len(f) == 2 && (f[1] == "wifi" || f[1] == "cellular" || f[1] == "none"):
		a.SetNetwork(f[1])
	case f[0] == "fail" && len(f) == 2 && (f[1] == "on" || f[1] == "off"):
		a.SetFailing(f[1] == "on")
		return nil
	case f[0] == "pause" && len(f) == 2 && (f[1] == "on" || f[1] == "off"):
		return a.SetPaused(ctx, f[1] == "on")
	case f[0] == "ping" && len(f) == 1:
	default:
		return fmt.Errorf("unknown command %q: !battery N [charging], !network wifi|cellular|none, !fail on|off, !pause on|off, !ping", line)
	}
	return a.Ping(ctx)
}

// agentState is what --state keeps.
type agentState struct {
	URL   string `json:"url"`
	ID    string `json:"id"`
	Token string `json:"token"`
}

// deviceAPIPath is where a server serves the device protocol.
const deviceAPIPath = "/api/mobile/v1"

// checkAgentURL refuses a URL that is not a device API (it ends in
// deviceAPIPath, with or without a slash, as the app takes it), and one
// the token would reach in the clear: plain http is for a loopback address
// only, as the app allows it only to 127.0.0.1.
func checkAgentURL(raw string) error {
	u, err := neturl.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("phone-agent: --url %q: want https://HOST/api/mobile/v1", raw)
	}
	if !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), deviceAPIPath) || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("phone-agent: --url %q is not a device API, which ends in %s: try %s://%s%s", raw, deviceAPIPath, u.Scheme, u.Host, deviceAPIPath)
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return fmt.Errorf("phone-agent: --url %q: plain http is refused except to a loopback address (the device's token and texts would cross the network in the clear): use https://", raw)
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// readAgentState reads the state file at path: nil when path is empty or
// there is no file yet.
func readAgentState(path string) (*agentState, error) {
	if path == "" {
		return nil, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		// It holds the device's token: close it down.
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("phone-agent: --state %s is open to other users and could not be made private: %w", path, err)
		}
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("phone-agent: --state: %w", err)
	}
	var st agentState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("phone-agent: --state %s: %w", path, err)
	}
	return &st, nil
}

func loadAgent(ctx context.Context, opt agent.Options, code, path string) (*agent.Agent, error) {
	st, err := readAgentState(path)
	if err != nil {
		return nil, err
	}
	if st != nil && code == "" && st.URL == opt.URL {
		return agent.New(opt, st.ID, st.Token), nil
	}
	if code == "" {
		return nil, errors.New("phone-agent: --code is required (the pairing code of POST /v1/phones)")
	}
	a, err := agent.Pair(ctx, opt, code)
	if err != nil {
		return nil, fmt.Errorf("phone-agent: %w", err)
	}
	if path != "" {
		b, _ := json.Marshal(agentState{URL: opt.URL, ID: a.ID, Token: a.Token})
		if err := os.WriteFile(path, b, 0o600); err != nil { // a file there is 0600 already: see above
			return nil, fmt.Errorf("phone-agent: --state: %w", err)
		}
	}
	return a, nil
}
