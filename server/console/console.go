// Package console is the tally console: one hand-written web page (HTML, a
// style sheet and a script, embedded in the binary, no build step) that
// reads a session through the server's public REST API and its event
// stream, and acts on a promise only through that API. It holds no state and no secret: the token a person pastes stays
// in the browser's sessionStorage and travels only as a bearer header.
package console

import (
	"embed"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// CSP allows the page's own script, style sheet and API only: no inline
// script or style, nothing from another origin, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// types are the content types of the files the page is made of.
var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

func serve(w http.ResponseWriter, r *http.Request, name string) {
	b, err := static.ReadFile("static/" + name)
	ct, known := types[path.Ext(name)]
	if err != nil || !known || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	// The files change only with the binary; revalidate rather than cache
	// stale code across an upgrade.
	h.Set("Cache-Control", "no-cache")
	w.Write(b)
}

// Index serves the page.
func Index(w http.ResponseWriter, r *http.Request) { serve(w, r, "index.html") }

// Asset serves one of the page's files by name (/console/{file}).
func Asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "index.html" {
		http.NotFound(w, r)
		return
	}
	serve(w, r, name)
}
