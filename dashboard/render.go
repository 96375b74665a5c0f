package dashboard

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// pageTemplate is one page's template set: the layout, the shared
// partials and the page.
type pageTemplate struct {
	t *template.Template
}

var funcs = template.FuncMap{
	// time writes a time for a person: a <time> element whose text is the
	// time in UTC, which the script (static/app.js) rewrites in the
	// browser's own zone.
	"time": func(t any) template.HTML {
		var at time.Time
		switch t := t.(type) {
		case time.Time:
			at = t
		case *time.Time:
			if t != nil {
				at = *t
			}
		}
		if at.IsZero() {
			return ""
		}
		at = at.UTC()
		return template.HTML(`<time datetime="` + at.Format(time.RFC3339Nano) + `">` + at.Format("2006-01-02 15:04:05") + ` UTC</time>`)
	},
	"day": func(t time.Time) string { return t.UTC().Format("Jan 2") },
	"num": func(n any) string {
		var v int64
		switch n := n.(type) {
		case int:
			v = int64(n)
		case int64:
			v = n
		}
		return groupDigits(v)
	},
	"truncate": func(s string, n int) string {
		r := []rune(s)
		if len(r) <= n {
			return s
		}
		return string(r[:n]) + "…"
	},
	"join": strings.Join,
	"troubleText": func(t string) string {
		switch t {
		case sb.TroubleLowBattery:
			return "low battery"
		case sb.TroubleNoNetwork:
			return "no network"
		case sb.TroublePingLate:
			return "no recent ping"
		}
		return t
	},
	"dur": func(d time.Duration) string {
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	},
}

// groupDigits writes n with thousands separators.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// parseTemplates parses every page with the layout and the partials.
func parseTemplates() (map[string]*pageTemplate, error) {
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*pageTemplate{}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if name == "layout" || name == "partials" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", f)
		if err != nil {
			return nil, fmt.Errorf("dashboard template %s: %w", name, err)
		}
		pages[name] = &pageTemplate{t: t}
	}
	return pages, nil
}

// view is what every page template receives.
type view struct {
	Title string
	// Signed in: the tenant, the environment and the session's form token.
	SignedIn bool
	Tenant   *sb.Tenant
	Env      string
	TestOnly bool
	CSRF     string
	// Base is the path of the environment's pages; Switch is the same
	// section in the other environment; Section names the page for the
	// navigation.
	Base    string
	Switch  string
	Section string
	// Notice is a confirmation shown at the top of the page.
	Notice string
	Data   any
}

// sections of the navigation, in order.
var sections = []struct{ Path, Name string }{
	{"/", "Overview"}, {"/send", "Send"}, {"/messages", "Messages"}, {"/templates", "Templates"}, {"/contacts", "Contacts"},
	{"/campaigns", "Campaigns"}, {"/phones", "Phones"}, {"/webhooks", "Webhooks"}, {"/keys", "API keys"},
}

// Sections lists the navigation for templates.
func (view) Sections() []struct{ Path, Name string } { return sections }

// notices are the confirmations a redirect can ask for (?notice=NAME):
// fixed texts, so no link can make a page say something else.
var notices = map[string]string{
	"key-revoked":       "The key was revoked. Requests made with it now fail.",
	"webhook-created":   "The webhook was created.",
	"webhook-updated":   "The webhook was changed.",
	"webhook-deleted":   "The webhook was deleted. No more events are sent to it.",
	"test-sent":         "A test event is on its way; its delivery appears in the log below.",
	"delivery-retried":  "The delivery is being sent again; its new attempt appears below.",
	"campaign-created":  "The campaign was created as a draft. Launch it when you are ready.",
	"campaign-launched": "The campaign was launched. Its progress updates below.",
	"campaign-canceled": "The campaign was canceled. Messages not sent yet are withdrawn.",
	"other-sessions":    "Other sessions of this account are signed in too. Review them, or sign them out, under Sessions.",
	"sessions-ended":    "Every other session was signed out.",
	"session-ended":     "The session was signed out.",
	"session-gone":      "That session had already ended.",
	"message-sent":      "The message was accepted and queued. Its status updates as it is delivered.",
	"message-quiet":     "The message was accepted during the recipient's quiet hours: it waits until they end (see its timeline).",
	"template-created":  "The template was created.",
	"template-deleted":  "The template was deleted. Sends that name it now answer INVALID_TEMPLATE.",
	"contact-created":   "The contact was added.",
	"contact-saved":     "The contact was saved.",
	"contact-deleted":   "The contact was deleted.",
	"phone-saved":       "The phone's limits were saved.",
	"phone-released":    "The phone is back in rotation.",
	"phone-deleted":     "The phone was deleted. Its device can no longer connect; its waiting messages go to another phone.",
}

// newView fills the parts of a page every signed-in page shares.
func newView(r *http.Request, v *visit, title string, data any) view {
	out := view{Title: title, Data: data}
	if v == nil {
		return out
	}
	out.SignedIn, out.Tenant, out.Env, out.TestOnly, out.CSRF, out.Base = true, v.tenant, string(v.env), v.session.TestOnly, v.csrf, v.base()
	// The section is the path's first part after the environment.
	rest := strings.TrimPrefix(r.URL.Path, v.base())
	section := "/"
	if parts := strings.SplitN(strings.TrimPrefix(rest, "/"), "/", 2); parts[0] != "" {
		section = "/" + parts[0]
	}
	out.Section = section
	other := "/dashboard/test"
	if v.env == sb.Test {
		other = "/dashboard"
	}
	if section == "/" {
		out.Switch = other + "/"
	} else {
		out.Switch = other + section
	}
	out.Notice = notices[r.URL.Query().Get("notice")]
	if v.flash != nil && v.flash.Notice != "" {
		out.Notice = v.flash.Notice
	}
	return out
}

// render renders a page of name with data, in the layout.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, v *visit, status int, name, title string, data any) error {
	return h.renderView(w, status, name, "layout", newView(r, v, title, data))
}

// renderFragment renders the template block of a page that the script
// refreshes.
func (h *Handler) renderFragment(w http.ResponseWriter, r *http.Request, v *visit, page, block string, data any) error {
	return h.renderView(w, http.StatusOK, page, block, newView(r, v, "", data))
}

func (h *Handler) renderView(w http.ResponseWriter, status int, page, block string, vw view) error {
	pt, ok := h.pages[page]
	if !ok {
		return fmt.Errorf("dashboard: no template %q", page)
	}
	var buf bytes.Buffer
	if err := pt.t.ExecuteTemplate(&buf, block, vw); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
	return nil
}

// errorView is the error page.
type errorView struct {
	Status  int
	Message string
}

func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, v *visit, status int, msg string) {
	if err := h.render(w, r, v, status, "error", http.StatusText(status), errorView{Status: status, Message: msg}); err != nil {
		slog.Error("dashboard: rendering the error page", "err", err)
		http.Error(w, msg, status)
	}
}

// static files, with their types.
var staticTypes = map[string]string{
	"style.css": "text/css; charset=utf-8",
	"app.js":    "text/javascript; charset=utf-8",
}

func serveStatic(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	ct, ok := staticTypes[file]
	if !ok {
		http.NotFound(w, r)
		return
	}
	b, err := staticFS.ReadFile("static/" + file)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Write(b)
}
