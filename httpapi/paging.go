package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/phonenum"
)

// Query parameters of the lists (docs/api.md).
var pageParams = []string{"limit", "after"}

// checkQuery checks the query string of r against the parameters its route
// takes: an unknown parameter (a filter the route does not have would
// otherwise be ignored, and the answer look filtered when it is not), a
// parameter given twice or given empty is VALIDATION_ERROR naming it. A
// query that is not well-formed is VALIDATION_ERROR on "query".
func checkQuery(r *http.Request, allowed []string) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return sb.Invalid("query", "The query string is malformed: %s.", err.Error())
	}
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		switch {
		case !slices.Contains(allowed, k):
			if len(allowed) == 0 {
				return sb.Invalid(k, "Unknown query parameter %q: %s %s takes none.", k, r.Method, r.Pattern[strings.IndexByte(r.Pattern, ' ')+1:])
			}
			return sb.Invalid(k, "Unknown query parameter %q; this route takes %s.", k, strings.Join(allowed, ", "))
		case len(q[k]) > 1:
			return sb.Invalid(k, "The query parameter %s is given %d times; give it once.", k, len(q[k]))
		case q[k][0] == "":
			return sb.Invalid(k, "The query parameter %s is empty; leave it out or give it a value.", k)
		}
	}
	return nil
}

// page reads the cursor parameters of a list (docs/api.md): limit
// 1..100 (default 50) and after (an id). checkQuery has already refused
// unknown, repeated and empty parameters.
func page(r *http.Request) (sb.Page, error) {
	q := r.URL.Query()
	p := sb.Page{Limit: 50, After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return p, sb.Invalid("limit", "limit must be a whole number from 1 to 100.")
		}
		p.Limit = n
	}
	if p.After != "" && !sb.ValidID(p.After) {
		return p, sb.Invalid("after", "after must be the id of an item of the list (26 characters, as in the Link header), not %q.", clip(p.After, 40))
	}
	return p, nil
}

// phoneParam returns the E.164 number of query parameter name, "" when it
// is absent, or INVALID_PHONE_NUMBER naming it. A value that starts with a
// space was most likely written with a bare "+", which a query string
// decodes as a space: the error says to write it %2B.
func phoneParam(r *http.Request, name string) (string, error) {
	v := r.URL.Query().Get(name)
	if v == "" || phonenum.Valid(v) {
		return v, nil
	}
	hint := ""
	if strings.HasPrefix(v, " ") && phonenum.Valid("+"+v[1:]) {
		hint = ` In a query string "+" means a space: write it %2B (` + name + `=%2B` + v[1:] + `).`
	}
	return "", sb.InvalidPhone(name, "%s must be an E.164 number: + and 10 to 15 digits.%s", name, hint)
}

// clip shortens s to at most n bytes for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// setNextLink sets `Link: <path?...&after=ID&limit=N>; rel="next"` when the
// store returned more items than the page holds (it fetches limit+1), and
// returns the items of this page.
func setNextLink[T any](w http.ResponseWriter, r *http.Request, p sb.Page, items []T, id func(T) string) []T {
	if len(items) <= p.Limit {
		return items
	}
	items = items[:p.Limit]
	q := url.Values{}
	for k, v := range r.URL.Query() {
		if k != "after" && k != "limit" {
			q[k] = v
		}
	}
	q.Set("after", id(items[len(items)-1]))
	q.Set("limit", strconv.Itoa(p.Limit))
	w.Header().Set("Link", "<"+r.URL.Path+"?"+q.Encode()+`>; rel="next"`)
	return items
}
