package httpapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
)

// The API reference at GET /docs: a static page that renders the served
// OpenAPI document (/v1/openapi.json) with Redoc. Redoc's standalone bundle
// is committed under docs/, taken unchanged from the npm package pinned in
// tools/openapi/package.json (TestOpenAPITools checks they are the same
// bytes), and served by the binary itself: the page loads nothing from
// anywhere else. Like /healthz and the document, the page needs no key;
// like /metrics, it is not part of the JSON API and has no envelope.
//
//go:embed docs/index.html docs/redoc.standalone.js docs/redoc.standalone.js.LICENSE.txt
var docsFS embed.FS

// docsCSP lets the page run only its own script: Redoc injects its styles,
// draws images from data: URLs and runs its search index in a worker made
// from a blob: URL; it fetches the document from this server.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// docsAsset is one embedded file, with its gzip form made on first use.
type docsAsset struct {
	name, contentType, cacheControl string

	once         sync.Once
	plain, gz    []byte
	etag, gzEtag string
}

func (a *docsAsset) load() {
	a.once.Do(func() {
		b, err := docsFS.ReadFile("docs/" + a.name)
		if err != nil {
			panic(err) // embedded: cannot happen
		}
		a.plain = b
		sum := sha256.Sum256(b)
		a.etag = `"` + hex.EncodeToString(sum[:8]) + `"`
		a.gzEtag = `"` + hex.EncodeToString(sum[:8]) + `-gzip"`
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		a.gz = buf.Bytes()
	})
}

func (a *docsAsset) serve(w http.ResponseWriter, r *http.Request) error {
	a.load()
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", a.cacheControl)
	h.Set("Vary", "Accept-Encoding")
	h.Set("X-Content-Type-Options", "nosniff")
	if a.contentType == "text/html; charset=utf-8" {
		h.Set("Content-Security-Policy", docsCSP)
		h.Set("Referrer-Policy", "no-referrer")
	}
	body, etag := a.plain, a.etag
	if acceptsGzip(r) {
		body, etag = a.gz, a.gzEtag
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Contains(inm, etag) {
		h.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	w.Write(body)
	return nil
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

var (
	docsPage    = &docsAsset{name: "index.html", contentType: "text/html; charset=utf-8", cacheControl: "no-cache"}
	docsScript  = &docsAsset{name: "redoc.standalone.js", contentType: "text/javascript; charset=utf-8", cacheControl: "public, max-age=86400"}
	docsLicense = &docsAsset{name: "redoc.standalone.js.LICENSE.txt", contentType: "text/plain; charset=utf-8", cacheControl: "public, max-age=86400"}
)
