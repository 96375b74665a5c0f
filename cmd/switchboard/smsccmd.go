package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/linxGnu/gosmpp/pdu"

	"github.com/switchboard/switchboard/provider/smpp/smsc"
)

// smscCmd runs the test SMSC (provider/smpp/smsc) as a command, for trying
// an SMPP link before a carrier contract: it accepts transceiver binds of
// one system_id and password, answers every submit_sm, sends a delivery
// receipt for each, and prints every PDU it reads and writes.
func smscCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	f := newFlags("smsc", getenv, stdout)
	f.synopsis = "--system-id ID"
	f.about = `Runs a small SMSC (an SMPP 3.4 server) to try an SMPP link against (docs/carriers.md):
it accepts transceiver binds of --system-id with the password in the variable
--password-env names, answers every submit_sm, sends a delivery receipt with
--stat for each, and prints each PDU it reads (<) and writes (>). It is a test
tool: it keeps nothing on disk.`
	addr := f.String("addr", "127.0.0.1:2775", "the address to listen on (host:port)")
	systemID := f.String("system-id", "", "the system_id binds must give (required)")
	passwordEnv := f.String("password-env", "", "the environment variable holding the password binds must give (none: any password)")
	stat := f.String("stat", "DELIVRD", "the stat of the receipts: DELIVRD, UNDELIV, REJECTD, EXPIRED, DELETED, UNKNOWN or ENROUTE")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if *systemID == "" {
		return fmt.Errorf("smsc: --system-id is required")
	}
	password := ""
	if *passwordEnv != "" {
		if password = getenv(*passwordEnv); password == "" {
			return fmt.Errorf("smsc: --password-env: the environment variable %s is not set", *passwordEnv)
		}
	}
	receipt := strings.ToUpper(*stat)
	switch receipt {
	case "DELIVRD", "UNDELIV", "REJECTD", "EXPIRED", "DELETED", "UNKNOWN", "ENROUTE":
	default:
		return fmt.Errorf("smsc: --stat %q: want DELIVRD, UNDELIV, REJECTD, EXPIRED, DELETED, UNKNOWN or ENROUTE", *stat)
	}
	var mu sync.Mutex
	srv := &smsc.Server{SystemID: *systemID, Password: password,
		OnSubmit: func(*smsc.Submit) smsc.Action { return smsc.Action{Stat: receipt} },
		Log: func(dir string, p pdu.PDU) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(stdout, "%s %s\n", dir, describePDU(p))
		}}
	if err := srv.StartAt(*addr); err != nil {
		return fmt.Errorf("smsc: %w", err)
	}
	mu.Lock()
	fmt.Fprintf(stdout, "smsc: listening on %s for binds of system_id %s\n", srv.Addr(), *systemID)
	mu.Unlock()
	<-ctx.Done()
	srv.Close()
	return nil
}

// describePDU is one line about p: its command, sequence number and
// status, and what matters of it (never a password).
func describePDU(p pdu.PDU) string {
	h := p.GetHeader()
	s := fmt.Sprintf("%s seq=%d", strings.ToLower(h.CommandID.String()), h.SequenceNumber)
	if h.CommandStatus != 0 {
		name := h.CommandStatus.String()
		if strings.HasPrefix(name, "CommandStatusType(") {
			name = fmt.Sprintf("0x%08X", uint32(h.CommandStatus)) // a vendor's
		}
		s += fmt.Sprintf(" status=%s", name)
	}
	switch p := p.(type) {
	case *pdu.BindRequest:
		s += fmt.Sprintf(" system_id=%q system_type=%q", p.SystemID, p.SystemType)
	case *pdu.SubmitSM:
		text, _ := p.Message.GetMessage()
		s += fmt.Sprintf(" from=%s to=%s data_coding=%d text=%q", p.SourceAddr.Address(), p.DestAddr.Address(), p.Message.Encoding().DataCoding(), text)
	case *pdu.SubmitSMResp:
		s += fmt.Sprintf(" message_id=%s", p.MessageID)
	case *pdu.DeliverSM:
		text, _ := p.Message.GetMessage()
		s += fmt.Sprintf(" from=%s to=%s esm_class=0x%02X text=%q", p.SourceAddr.Address(), p.DestAddr.Address(), p.EsmClass, text)
	}
	return s
}
