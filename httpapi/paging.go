package httpapi

import (
	"net/http"
	"net/url"
	"strconv"

	sb "github.com/switchboard/switchboard"
)

// page reads the cursor parameters of a list (contract section 4): limit
// 1..100 (default 50) and after (an id).
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
	return p, nil
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
