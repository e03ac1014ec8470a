//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/testlab"
)

// EnvScreenshots names the directory the browser tests save their
// screenshots in; default <root>/.cache/e2e-screenshots/<test>.
const EnvScreenshots = "SCHEDULEARN_SCREENSHOTS"

// findChromium is Debian's chromium (make chromium installs it with
// apt-get; the browser tests download no browser).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Fatal("chromium not found: install Debian's with `make chromium` (tools/apt-install.sh chromium)")
	return ""
}

// browser is a headless Chromium driven over the DevTools protocol.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string // screenshots
}

// startBrowser starts Chromium (its own profile in a temp dir, stopped
// when the test ends) and opens the dashboard at addr.
func startBrowser(t *testing.T, path, addr string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests may run as root
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.WindowSize(1400, 1100),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// Start the browser on the tab's own context: the first action starts
	// it, bound to the context it runs with (a timeout's would end it).
	must.NoError(t, chromedp.Do(ctx), must.Sprintf("failed to start %s", path))
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		dir = filepath.Join(testlab.Root(t), ".cache", "e2e-screenshots", t.Name())
	}
	must.NoError(t, os.MkdirAll(dir, 0o755))
	b := &browser{t: t, ctx: ctx, dir: dir}
	b.navigate(addr + "/ui/")
	return b
}

func (b *browser) navigate(url string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	must.NoError(b.t, chromedp.Do(ctx, chromedp.Navigate(url)), must.Sprintf("navigate to %s", url))
}

// eval runs JavaScript in the page and decodes its JSON value into out.
func (b *browser) eval(js string, out any) error {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage]("JSON.stringify("+js+")"))
	if err != nil {
		return err
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	return json.Unmarshal([]byte(s), out)
}

func jsString(s string) string { b, _ := json.Marshal(s); return string(b) }

// int evaluates js to a number.
func (b *browser) int(js string) int {
	b.t.Helper()
	var n float64
	if err := b.eval("Number("+js+")", &n); err != nil {
		b.t.Logf("eval %s: %v", js, err)
		return 0
	}
	return int(n)
}

// count is how many elements match sel.
func (b *browser) count(sel string) int {
	return b.int("document.querySelectorAll(" + jsString(sel) + ").length")
}

// waitVisible waits until an element matching sel is shown.
func (b *browser) waitVisible(sel string) {
	b.t.Helper()
	waitUntil(b.t, 3*time.Minute, func() error {
		var ok bool
		if err := b.eval("(e => !!e && e.getClientRects().length > 0)(document.querySelector("+jsString(sel)+"))", &ok); err != nil {
			return errorf("failed to query %s: %v", sel, err)
		}
		if !ok {
			return errorf("%s not shown (page error: %q)", sel, b.text("#error"))
		}
		return nil
	})
}

// text is the text of the first element matching sel ("" if none).
func (b *browser) text(sel string) string {
	var s string
	_ = b.eval("(e => e ? e.textContent : \"\")(document.querySelector("+jsString(sel)+"))", &s)
	return s
}

// waitText waits until the element matching sel shows want.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	waitUntil(b.t, 3*time.Minute, func() error {
		if got := b.text(sel); !strings.Contains(got, want) {
			return errorf("%s shows %q, want %q (page error: %q)", sel, got, want, b.text("#error"))
		}
		return nil
	})
}

// selectAndSubmit picks value in the select sel and clicks button.
func (b *browser) selectAndSubmit(sel, value, button string) {
	b.t.Helper()
	option := sel + " option[value=" + jsString(value) + "]"
	waitUntil(b.t, time.Minute, func() error { // options have no box to be visible in
		if b.count(option) == 0 {
			return errorf("no %s", option)
		}
		return nil
	})
	var ok bool
	must.NoError(b.t, b.eval("(() => { document.querySelector("+jsString(sel)+").value = "+jsString(value)+
		"; document.querySelector("+jsString(button)+").click(); return true })()", &ok))
}

// selectChange picks value in the select sel as a user does: the page
// hears a change event.
func (b *browser) selectChange(sel, value string) {
	b.t.Helper()
	var ok bool
	must.NoError(b.t, b.eval("(() => { const s = document.querySelector("+jsString(sel)+"); s.value = "+jsString(value)+
		"; s.dispatchEvent(new Event(\"change\")); return s.value === "+jsString(value)+" })()", &ok))
	must.True(b.t, ok, must.Sprintf("%s has no option %s", sel, value))
}

// cells is the text of the elements matching sel by their data-field.
func (b *browser) cells(sel string) map[string]string {
	b.t.Helper()
	var out map[string]string
	must.NoError(b.t, b.eval("Object.fromEntries(Array.from(document.querySelectorAll("+jsString(sel)+
		"), e => [e.dataset.field, e.textContent]))", &out))
	return out
}

// typeAndSubmit replaces what the input sel holds with text, typed, and
// clicks button.
func (b *browser) typeAndSubmit(sel, text, button string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).value = ""`, sel)))
	must.NoError(b.t, err, must.Sprintf("clear %s", sel))
	must.NoError(b.t, chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(sel)),
		chromedp.SendKeys(chromedp.CSS(sel), text), chromedp.Click(chromedp.CSS(button))))
}

// screenshot saves the viewport as name in the screenshot directory.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must.NoError(b.t, err)
	path := filepath.Join(b.dir, name)
	must.NoError(b.t, os.WriteFile(path, png, 0o644))
	b.t.Logf("screenshot: %s", path)
}
