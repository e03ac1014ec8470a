package command

import (
	"context"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// N6: a job's user and a reported metric name, stored before the planner
// refused such text, reach job list and job status: clear-screen, a
// window title, colours, a right-to-left override. The CLI prints them
// escaped, in every form (tables, key = value, the jobspec, JSON, the
// monitor), and the text around them stays as it was.
func TestN6_CLIEscapesUserText(t *testing.T) {
	const evil = "mallory\x1b[2J\x1b]0;pwned\x07\x1b[31m\u202etxt.exe\u009b"
	const shown = `mallory\u001b[2J\u001b]0;pwned\u0007\u001b[31m\u202etxt.exe\u009b`
	h := newHarness(t)
	id := h.submit(elastic)
	h.backend.Start(id, map[string]int{"gpu-1": 2}, "start")
	h.backend.Update(id, func(j *structs.Job) {
		spec := j.Spec
		spec.User = evil
		j.Spec = spec
		j.Source = "training \"bert\" {\n  user = \"" + evil + "\"\n}\n"
		j.AddEvents(structs.Event{Type: structs.EventWarning, Message: "said " + evil})
	})
	_, err := h.backend.ReportProgress(context.Background(), id, []api.ProgressReport{
		{Step: 1, Metric: &structs.Metric{Name: "acc" + evil, Value: 0.5}},
	})
	must.NoError(t, err)

	clean := func(args ...string) string {
		t.Helper()
		must.Eq(t, ExitOK, h.run(args...))
		out := h.out.String() + h.err.String()
		must.False(t, strings.ContainsFunc(out, func(r rune) bool {
			return r == 0x1b || r == 0x07 || r == '\u202e' || r == '\u009b'
		}), must.Sprintf("%v printed a raw escape: %q", args, out))
		return out
	}
	out := clean("job", "list")
	must.StrContains(t, out, shown)
	out = clean("job", "status", "-verbose", id)
	must.StrContains(t, out, "User         = "+shown)
	must.StrContains(t, out, "acc"+shown+" 0.5")
	must.StrContains(t, out, "said "+shown)
	must.StrContains(t, out, "Jobspec\ntraining \"bert\" {\n  user = \""+shown+"\"\n}")
	// JSON stays JSON, with the same strings.
	clean("job", "status", "-json", id)
	must.Eq(t, evil, decodeOut[structs.Job](t, &h.out).Spec.User)
}
