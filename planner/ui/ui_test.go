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

// The page writes what users and jobs named (job names, users, commands,
// reasons, metric names) as text, never as HTML: no innerHTML, outerHTML,
// insertAdjacentHTML or document.write in its script (issue 28 put names,
// users and commands on the page).
func TestAssets_NoHTMLFromStrings(t *testing.T) {
	rec := httptest.NewRecorder()
	ui.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/app.js", nil))
	must.Eq(t, http.StatusOK, rec.Code)
	html := regexp.MustCompile(`\.(innerHTML|outerHTML|insertAdjacentHTML)\b|document\.write`)
	must.SliceEmpty(t, html.FindAllString(rec.Body.String(), -1))
}
