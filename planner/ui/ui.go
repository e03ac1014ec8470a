// Package ui is the planner's web dashboard, served under /ui/: plain
// HTML, CSS and JavaScript (SVG charts) embedded in the binary, with no
// build step and nothing fetched from elsewhere, so it works on an offline
// cluster. The page reads the API's read routes (/v1/queue, /v1/queues,
// /v1/nodes, /v1/jobs, /v1/utilization, ...) and follows GET /v1/events
// for live updates; it sends the token the user types (kept in the tab's
// sessionStorage) with every request.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// Handler serves the dashboard's assets ("/" is index.html).
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		// Everything the page loads comes from the planner itself.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
