package command

import (
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// job list and job status say why a queued job waits, with its place in
// its queue, as the planner's last round left it.
func TestJobStatus_Waiting(t *testing.T) {
	var waits map[string]string
	h := newObservedHarness(t, &waits)
	a := h.submit(fourGPUs)
	b := h.submit(elastic)
	h.backend.Start(a, map[string]int{"gpu-1": 4}, "start")
	why := "needs 2 GPUs; queue default at 4 of 4 GPUs; may borrow 0 more; 1st of 1 waiting in queue default"
	waits = map[string]string{b: why, a: "stale: a running job has no wait"}

	must.Eq(t, ExitOK, h.run("job", "list"))
	lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
	must.Len(t, 7, lines)
	must.Eq(t, "Waiting", lines[4])
	must.Eq(t, []string{"ID", "Queue", "Why", "it", "waits"}, strings.Fields(lines[5]))
	must.Eq(t, b+"  default  "+why, strings.Join(strings.Fields(lines[6])[:2], "  ")+"  "+strings.Join(strings.Fields(lines[6])[2:], " "))

	must.Eq(t, ExitOK, h.run("job", "status", b))
	must.StrContains(t, h.out.String(), "Waiting      = "+why)
	must.Eq(t, ExitOK, h.run("job", "status", a))
	must.StrNotContains(t, h.out.String(), "Waiting")

	must.Eq(t, ExitOK, h.run("job", "status", "-json", b))
	must.Eq(t, why, decodeOut[structs.Job](t, &h.out).Waiting)
}
