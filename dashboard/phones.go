package dashboard

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/phonenum"
	"github.com/switchboard/switchboard/sqlstore"
)

// PhoneStore is what the phones page needs from storage.
type PhoneStore interface {
	AddTenantPhone(ctx context.Context, p *sb.Phone, pairing *sb.Pairing, maxPhones int) error
	Phones(ctx context.Context, tenantID string, env sb.Environment) ([]*sb.Phone, error)
	Phone(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Phone, error)
	SetPairing(ctx context.Context, tenantID, id string, pairing *sb.Pairing) error
	UpdatePhone(ctx context.Context, tenantID, id string, patch sb.PhonePatch) error
	DeletePhone(ctx context.Context, tenantID, id string, now time.Time) error
}

type phonesView struct {
	Phones []phoneRow
	Form   phoneForm
	Error  string
	// Pairing is shown after a phone was added or given a new code.
	Pairing *pairingView
	// Engines are the chat engines the tenant may bind a number to, by
	// name; Bind and BindError the binding form.
	Engines   []string
	Bind      bindForm
	BindError string
}

type bindForm struct {
	Number, Provider string
}

type phoneRow struct {
	*sb.Phone
	Status string
	// Trouble is what the phone's health shows wrong (sb.PhoneTrouble);
	// Limit its effective daily limit today (its warm-up's, during one).
	Trouble []string
	Limit   int
	// WarmupDay is today's day of its warm-up (0 without one).
	WarmupDay int
}

func (h *Handler) row(p *sb.Phone, now time.Time) phoneRow {
	r := phoneRow{Phone: p, Status: h.cfg.Routing.Status(p, now), Limit: p.LimitOn(now)}
	if p.Status == sb.PhoneOnline {
		r.Trouble = h.cfg.Routing.Trouble(p, now)
	}
	if p.Warmup != nil {
		r.WarmupDay = p.Warmup.Day(now)
	}
	return r
}

type phoneForm struct {
	Number, DailyLimit, RateLimit string
}

type pairingView struct {
	Phone     *sb.Phone
	Code      string
	ExpiresAt time.Time
	// ServerURL is what to type into the app's API URL. When a phone
	// could not use it, Setup says what to set first, and there is no QR
	// code.
	ServerURL string
	Setup     *pairingSetup
	QR        *qrCode
	QRText    string
}

// pairingSetup says why a phone cannot reach the service at a URL.
type pairingSetup struct {
	// Loopback is set when the URL names this computer (127.0.0.1, ::1,
	// localhost): a phone's own loopback address is not the server.
	// Otherwise the URL is plain HTTP, which the app refuses except to
	// 127.0.0.1.
	Loopback bool
	// PublicURL is set when the URL is --public-url's; otherwise it is the
	// address the browser used.
	PublicURL bool
}

// setupFor returns what keeps a phone from the service at base, an
// absolute URL: nil when it is HTTPS to a name or address other than this
// computer's, the only URL the app takes that a phone can reach.
func setupFor(base string, public bool) *pairingSetup {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return &pairingSetup{PublicURL: public}
	}
	if loopbackHost(u.Hostname()) {
		return &pairingSetup{Loopback: true, PublicURL: public}
	}
	if u.Scheme != "https" {
		return &pairingSetup{PublicURL: public}
	}
	return nil
}

// loopbackHost reports whether host names this computer only: localhost,
// a loopback address, or the unspecified address (0.0.0.0, ::), which a
// listener takes but no phone can dial.
func loopbackHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && (a.Unmap().IsLoopback() || a.IsUnspecified())
}

func (h *Handler) phoneRows(ctx context.Context, v *visit) ([]phoneRow, error) {
	phones, err := h.cfg.Store.Phones(ctx, v.tenant.ID, v.env)
	if err != nil {
		return nil, err
	}
	out := make([]phoneRow, len(phones))
	for i, p := range phones {
		out[i] = h.row(p, v.now)
	}
	return out, nil
}

// phones lists the sending phones: status, last seen, and today's messages
// against the daily limit (in the page's environment).
func (h *Handler) phones(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	rows, err := h.phoneRows(ctx, v)
	if err != nil {
		return err
	}
	out := phonesView{Phones: rows, Form: phoneForm{DailyLimit: strconv.Itoa(sb.DefaultPhoneDailyLimit)}, Engines: h.engines()}
	if f := v.flash; f != nil && f.Pairing != nil && v.env == sb.Live {
		ph, err := h.cfg.Store.Phone(ctx, v.tenant.ID, v.env, f.Pairing.PhoneID)
		if err != nil && sb.ErrorCode(err) != sb.CodeNotFound {
			return err
		}
		if ph != nil {
			if out.Pairing, err = h.pairingView(r, ph, f.Pairing); err != nil {
				return err
			}
		}
	}
	return h.render(w, r, v, http.StatusOK, "phones", "Phones", out)
}

// errPhonesLive refuses changes to phones in the test environment, as the
// API refuses them to a test key.
var errPhonesLive = sb.Errorf(sb.CodeForbidden, "Phones are added, changed, paired and deleted in live mode; switch to live data to do it.")

// addPhone adds an android phone and shows how to pair it: the one-time
// code, the server URL to type into the app, and a QR code of both.
func (h *Handler) addPhone(w http.ResponseWriter, r *http.Request, v *visit) error {
	if v.env != sb.Live {
		return errPhonesLive
	}
	ctx := r.Context()
	form := phoneForm{Number: strings.TrimSpace(r.PostFormValue("number")), DailyLimit: strings.TrimSpace(r.PostFormValue("daily_limit")),
		RateLimit: strings.TrimSpace(r.PostFormValue("rate_limit"))}
	invalid := func(err error) error {
		return h.phonesRefused(w, r, v, err, func(view *phonesView, msg string) { view.Form, view.Error = form, msg })
	}
	if !phonenum.Valid(form.Number) {
		return invalid(sb.Errorf(sb.CodeInvalidPhoneNumber, "The number must be in E.164 form: + and 10 to 15 digits, such as +15551234567."))
	}
	now := v.now.UTC().Truncate(time.Microsecond)
	ph := &sb.Phone{ID: sb.NewID(), TenantID: v.tenant.ID, Number: form.Number, Kind: sb.PhoneAndroid, DailyLimit: sb.DefaultPhoneDailyLimit,
		Channels: []string{sb.ChannelSMS}, Status: sb.PhoneOnline, CreatedAt: now}
	var err error
	if ph.DailyLimit, err = wholeOrNone(form.DailyLimit, "daily_limit", sb.MaxPhoneDailyLimit); err != nil {
		return invalid(err)
	}
	if ph.RateLimit, err = wholeOrNone(form.RateLimit, "rate_limit", sb.MaxPhoneRateLimit); err != nil {
		return invalid(err)
	}
	pairing, err := newPairing(now, func(p *sb.Pairing) error { return h.cfg.Store.AddTenantPhone(ctx, ph, p, v.plan.MaxPhones) })
	if err != nil {
		return invalid(err)
	}
	return h.redirect(w, r, v, v.base()+"/phones", &flash{Pairing: &flashPairing{PhoneID: ph.ID, Code: pairing.Code, ExpiresAt: pairing.ExpiresAt}})
}

// phonesRefused shows the phones page again with a form's refusal: err's
// message, where set puts it (and the form as it was sent) in the view. An
// error that is not an *sb.Error is returned as it is.
func (h *Handler) phonesRefused(w http.ResponseWriter, r *http.Request, v *visit, err error, set func(*phonesView, string)) error {
	e, ok := err.(*sb.Error)
	if !ok {
		return err
	}
	rows, err := h.phoneRows(r.Context(), v)
	if err != nil {
		return err
	}
	view := phonesView{Phones: rows, Form: phoneForm{DailyLimit: strconv.Itoa(sb.DefaultPhoneDailyLimit)}, Engines: h.engines()}
	set(&view, e.Message)
	return h.render(w, r, v, http.StatusBadRequest, "phones", "Phones", view)
}

// engines returns the names of the chat engines tenants may bind, sorted.
func (h *Handler) engines() []string { return slices.Sorted(maps.Keys(h.cfg.Engines)) }

// bindPhone binds a number of the tenant's to a chat engine the operator
// lets tenants bind (as POST /v1/phones with provider does), and shows the
// new phone.
func (h *Handler) bindPhone(w http.ResponseWriter, r *http.Request, v *visit) error {
	if v.env != sb.Live {
		return errPhonesLive
	}
	ctx := r.Context()
	form := bindForm{Number: strings.TrimSpace(r.PostFormValue("number")), Provider: r.PostFormValue("provider")}
	invalid := func(err error) error {
		return h.phonesRefused(w, r, v, err, func(view *phonesView, msg string) { view.Bind, view.BindError = form, msg })
	}
	kind, ok := h.cfg.Engines[form.Provider]
	if !ok {
		return invalid(sb.Invalid("provider", "Choose one of the chat engines listed."))
	}
	if !phonenum.Valid(form.Number) {
		return invalid(sb.Errorf(sb.CodeInvalidPhoneNumber, "The number must be in E.164 form: + and 10 to 15 digits, such as +15551234567."))
	}
	ph := &sb.Phone{ID: sb.NewID(), TenantID: v.tenant.ID, Number: form.Number, Kind: kind, Link: form.Provider, DailyLimit: sb.DefaultPhoneDailyLimit,
		Channels: []string{sb.ChannelChat}, Status: sb.PhoneOnline, CreatedAt: v.now.UTC().Truncate(time.Microsecond)}
	if err := h.cfg.Store.AddTenantPhone(ctx, ph, nil, v.plan.MaxPhones); err != nil {
		return invalid(err)
	}
	return h.redirect(w, r, v, v.base()+"/phones/"+ph.ID, nil)
}

// wholeOrNone reads a limit of a form: empty for none, else a whole number
// from 1 to max.
func wholeOrNone(s, what string, max int) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, sb.Invalid(what, "The %s must be a whole number from 1 to %d, or empty for none.", strings.ReplaceAll(what, "_", " "), max)
	}
	return n, nil
}

// pairPhone gives an android phone a fresh code; its earlier codes stop
// working, and pairing replaces its device.
func (h *Handler) pairPhone(w http.ResponseWriter, r *http.Request, v *visit) error {
	if v.env != sb.Live {
		return errPhonesLive
	}
	ctx := r.Context()
	ph, err := h.cfg.Store.Phone(ctx, v.tenant.ID, v.env, r.PathValue("id"))
	if err != nil {
		return err
	}
	pairing, err := newPairing(v.now.UTC(), func(p *sb.Pairing) error { return h.cfg.Store.SetPairing(ctx, v.tenant.ID, ph.ID, p) })
	if err != nil {
		return err
	}
	return h.redirect(w, r, v, v.base()+"/phones", &flash{Pairing: &flashPairing{PhoneID: ph.ID, Code: pairing.Code, ExpiresAt: pairing.ExpiresAt}})
}

// newPairing makes a code and stores it, making another in the rare case
// that another phone's live code is the same (as the API does).
func newPairing(now time.Time, store func(*sb.Pairing) error) (*sb.Pairing, error) {
	for attempt := 0; ; attempt++ {
		p, err := sb.NewPairing(now.Truncate(time.Second))
		if err != nil {
			return nil, err
		}
		err = store(p)
		if !errors.Is(err, sqlstore.ErrPairingTaken) || attempt == 5 {
			return p, err
		}
	}
}

// pairingView is how to pair ph with the code p: the server URL to type
// into the app, and a QR code of both; or, when a phone could not use that
// URL (see setupFor), what to set first.
func (h *Handler) pairingView(r *http.Request, ph *sb.Phone, p *flashPairing) (*pairingView, error) {
	base := h.serverURL(r)
	v := &pairingView{Phone: ph, Code: p.Code, ExpiresAt: p.ExpiresAt, ServerURL: base + "/api/mobile/v1"}
	if v.Setup = setupFor(base, h.cfg.PublicURL != ""); v.Setup != nil {
		return v, nil
	}
	v.QRText = "Switchboard phone pairing\nAPI URL: " + v.ServerURL + "\nCode: " + p.Code
	var err error
	if v.QR, err = newQR(v.QRText); err != nil {
		return nil, err
	}
	return v, nil
}

type phoneView struct {
	Phone *phoneRow
	Form  phoneForm
	Error string
}

func limitText(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func (h *Handler) envPhone(ctx context.Context, v *visit, id string) (*phoneRow, error) {
	ph, err := h.cfg.Store.Phone(ctx, v.tenant.ID, v.env, id)
	if err != nil {
		return nil, err
	}
	row := h.row(ph, v.now)
	return &row, nil
}

// phone shows a phone with a form that changes its limits.
func (h *Handler) phone(w http.ResponseWriter, r *http.Request, v *visit) error {
	row, err := h.envPhone(r.Context(), v, r.PathValue("id"))
	if err != nil {
		return err
	}
	form := phoneForm{DailyLimit: limitText(row.DailyLimit), RateLimit: limitText(row.RateLimit)}
	return h.render(w, r, v, http.StatusOK, "phone", "Phone "+row.Number, phoneView{Phone: row, Form: form})
}

// updatePhone saves a phone's limits (empty removes one), as PATCH
// /v1/phones/{id} does.
func (h *Handler) updatePhone(w http.ResponseWriter, r *http.Request, v *visit) error {
	if v.env != sb.Live {
		return errPhonesLive
	}
	ctx, id := r.Context(), r.PathValue("id")
	row, err := h.envPhone(ctx, v, id)
	if err != nil {
		return err
	}
	form := phoneForm{DailyLimit: r.PostFormValue("daily_limit"), RateLimit: r.PostFormValue("rate_limit")}
	var patch sb.PhonePatch
	daily, err := wholeOrNone(form.DailyLimit, "daily_limit", sb.MaxPhoneDailyLimit)
	if err == nil {
		patch.DailyLimit = &daily
		var rate int
		rate, err = wholeOrNone(form.RateLimit, "rate_limit", sb.MaxPhoneRateLimit)
		patch.RateLimit = &rate
	}
	if err == nil {
		err = h.cfg.Store.UpdatePhone(ctx, v.tenant.ID, id, patch)
	}
	var e *sb.Error
	if errors.As(err, &e) && e.Code != sb.CodeNotFound {
		return h.render(w, r, v, statusOf(e), "phone", "Phone "+row.Number, phoneView{Phone: row, Form: form, Error: e.Message})
	}
	if err != nil {
		return err
	}
	return h.redirect(w, r, v, v.base()+"/phones/"+id+"?notice=phone-saved", nil)
}

// releasePhone brings a quarantined phone back into rotation, as PATCH
// /v1/phones/{id} {"status": "online"} does.
func (h *Handler) releasePhone(w http.ResponseWriter, r *http.Request, v *visit) error {
	if v.env != sb.Live {
		return errPhonesLive
	}
	online := sb.PhoneOnline
	id := r.PathValue("id")
	if err := h.cfg.Store.UpdatePhone(r.Context(), v.tenant.ID, id, sb.PhonePatch{Status: &online}); err != nil {
		return err
	}
	return h.redirect(w, r, v, v.base()+"/phones/"+id+"?notice=phone-released", nil)
}

func (h *Handler) confirmDeletePhone(w http.ResponseWriter, r *http.Request, v *visit) error {
	if v.env != sb.Live {
		return errPhonesLive
	}
	row, err := h.envPhone(r.Context(), v, r.PathValue("id"))
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "deletephone", "Delete phone "+row.Number, row)
}

// deletePhone deletes a phone as DELETE /v1/phones/{id} does: its device's
// token stops working, its waiting messages move to another phone.
func (h *Handler) deletePhone(w http.ResponseWriter, r *http.Request, v *visit) error {
	if v.env != sb.Live {
		return errPhonesLive
	}
	if err := h.cfg.Store.DeletePhone(r.Context(), v.tenant.ID, r.PathValue("id"), v.now.UTC()); err != nil {
		return err
	}
	return h.redirect(w, r, v, v.base()+"/phones?notice=phone-deleted", nil)
}

// serverURL is the base URL devices reach the service at: --public-url, or
// the scheme and host the browser used.
func (h *Handler) serverURL(r *http.Request) string {
	if h.cfg.PublicURL != "" {
		return strings.TrimSuffix(h.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
