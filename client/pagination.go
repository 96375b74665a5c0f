package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ListParams are the paging parameters of a list.
type ListParams struct {
	// Limit is the page size, 1 to 100; 0 is the server's default (50).
	// The iterator fetches as many pages as the loop consumes, whatever the
	// page size: stop the loop to stop fetching.
	Limit int
	// After starts the list after the item with this id (a cursor).
	After string
}

func (p *ListParams) values(q url.Values) url.Values {
	if q == nil {
		q = url.Values{}
	}
	if p == nil {
		return q
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.After != "" {
		q.Set("after", p.After)
	}
	return q
}

// list returns an iterator over the items of a paginated list, newest first
// as the server orders them. It fetches the first page when the loop
// starts, and each next page, from the URL of the Link header's rel="next",
// once the loop has consumed the page before. An error ends the iteration:
// it is yielded with a nil item.
func list[T any](ctx context.Context, c *Client, q url.Values, segments ...string) iter.Seq2[*T, error] {
	return func(yield func(*T, error) bool) {
		u, err := c.endpoint(q, segments...)
		if err != nil {
			yield(nil, err)
			return
		}
		for u != nil {
			resp, err := c.do(ctx, &request{method: http.MethodGet, url: u})
			if err != nil {
				yield(nil, err)
				return
			}
			var items []*T
			if _, err := resp.decode(&items); err != nil {
				yield(nil, err)
				return
			}
			next, nextErr := c.nextPage(u, resp.header)
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if nextErr != nil {
				yield(nil, nextErr)
				return
			}
			u = next
		}
	}
}

// nextPage returns the URL of the Link header's rel="next", resolved
// against the URL of the page that carried it (and put under the base URL's
// path prefix when it is not), or nil on the last page. It refuses a link
// to another origin, which would receive the API key.
func (c *Client) nextPage(cur *url.URL, h http.Header) (*url.URL, error) {
	ref := nextLink(h.Values("Link"))
	if ref == "" {
		return nil, nil
	}
	r, err := url.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("switchboard: the Link header's next page %q: %w", ref, err)
	}
	next := cur.ResolveReference(r)
	if prefix := c.base.Path; prefix != "" && !strings.HasPrefix(next.Path, prefix+"/") {
		// The API is served under a prefix by a proxy that passed the
		// server's Link, which knows no prefix, through unchanged.
		next.Path = prefix + next.Path
		if next.RawPath != "" {
			next.RawPath = c.base.EscapedPath() + next.RawPath
		}
	}
	if next.Scheme != c.base.Scheme || next.Host != c.base.Host {
		return nil, fmt.Errorf("switchboard: the Link header's next page is on another origin (%s://%s); not following it", next.Scheme, next.Host)
	}
	if next.String() == cur.String() {
		return nil, errors.New("switchboard: the Link header's next page is the page itself")
	}
	return next, nil
}

// nextLink returns the target of the first link with rel="next" in the
// Link header values (RFC 8288), or "".
func nextLink(values []string) string {
	for _, v := range values {
		for v != "" {
			start := strings.IndexByte(v, '<')
			if start < 0 {
				break
			}
			end := strings.IndexByte(v[start:], '>')
			if end < 0 {
				break
			}
			target := v[start+1 : start+end]
			rest := v[start+end+1:]
			params := rest
			if i := strings.IndexByte(rest, '<'); i >= 0 {
				params = rest[:i]
			}
			for p := range strings.SplitSeq(params, ";") {
				name, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(name), "rel") {
					continue
				}
				val = strings.Trim(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(val), ",")), `"`)
				for rel := range strings.FieldsSeq(val) {
					if strings.EqualFold(rel, "next") {
						return target
					}
				}
			}
			v = rest
		}
	}
	return ""
}
