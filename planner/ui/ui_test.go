package ui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/ui"
)

// The dashboard's files are embedded and refer to nothing off the
// planner: no scheme-qualified or protocol-relative URL anywhere (an
// offline cluster has no CDN), and the page is served with a CSP of
// 'self'.
func TestHandler_ServesEmbeddedSelfContainedAssets(t *testing.T) {
	h := ui.Handler()
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|fetch\(\s*["'](https?:)?//`)
	tests := []struct {
		path, contentType string
	}{
		{"/", "text/html; charset=utf-8"},
		{"/app.js", "text/javascript; charset=utf-8"},
		{"/style.css", "text/css; charset=utf-8"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			must.Eq(t, http.StatusOK, rec.Code)
			must.Eq(t, tc.contentType, rec.Header().Get("Content-Type"))
			must.StrContains(t, rec.Header().Get("Content-Security-Policy"), "default-src 'self'")
			body, err := io.ReadAll(rec.Body)
			must.NoError(t, err)
			must.SliceEmpty(t, external.FindAllString(string(body), -1))
		})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nope.js", nil))
	must.Eq(t, http.StatusNotFound, rec.Code)
}

// N6: the dashboard shows users' text (a job's user, a metric's name, an
// event) as text: it builds the page with createElement, textContent and
// text nodes, never by parsing strings as HTML, so no text can become
// markup or script. This fails when a sink that parses HTML appears.
func TestN6_DashboardWritesTextNotHTML(t *testing.T) {
	h := ui.Handler()
	sinks := regexp.MustCompile(`\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write|DOMParser|createContextualFragment|srcdoc|eval)\b|new Function\(`)
	for _, path := range []string{"/app.js", "/"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		must.Eq(t, http.StatusOK, rec.Code)
		must.SliceEmpty(t, sinks.FindAllString(rec.Body.String(), -1), must.Sprint(path))
	}
}
