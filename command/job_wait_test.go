package command

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// job list says why each queued job waits, in queue order: its queue,
// its place there, the cause in a word and the reason, cut to one bounded
// line (-verbose: whole); job status says it whole, with the place.
func TestJobStatus_Waiting(t *testing.T) {
	var waits map[string]structs.Wait
	h := newObservedHarness(t, &waits)
	vision := func(name string, priority int) string {
		return "training \"" + name + "\" {\n  command = \"python3\"\n  queue = \"vision\"\n  priority = " + strconv.Itoa(priority) + "\n  gpus = 2\n}\n"
	}
	a := h.submit(fourGPUs)
	v1 := h.submit(vision("low", 10))
	v2 := h.submit(vision("high", 90))
	d := h.submit(elastic)
	u := h.submit(elastic)
	h.backend.Start(a, map[string]int{"gpu-1": 4}, "start")
	long := "needs 2 GPUs; queue vision at 16 of 16 GPUs; may borrow 0 more; " + strings.Repeat("and more ", 10)
	waits = map[string]structs.Wait{
		v1: {Cause: structs.WaitQuota, Reason: long, Queue: "vision", Position: 2, Of: 2},
		v2: {Cause: structs.WaitPolicy, Reason: "fifo starts jobs in order;\nnot this\tone yet", Queue: "vision", Position: 1, Of: 2},
		d:  {Cause: structs.WaitGPUs, Reason: "needs 2 GPUs; 0 free that it may use", Queue: "default", Position: 1, Of: 2},
		a:  {Cause: structs.WaitGPUs, Reason: "stale: a running job has no wait"},
	}

	must.Eq(t, ExitOK, h.run("job", "list"))
	out := h.out.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	must.Len(t, 13, lines)
	must.Eq(t, []string{v1, "low", "<none>", "vision", "10", "queued"}, strings.Fields(lines[2])[:6])
	must.Eq(t, "Waiting", lines[7])
	must.Eq(t, []string{"ID", "Queue", "Place", "Cause", "Why", "it", "waits"}, strings.Fields(lines[8]))
	row := func(line string) string { return strings.Join(strings.Fields(line), " ") }
	must.Eq(t, d+" default 1 of 2 gpus needs 2 GPUs; 0 free that it may use", row(lines[9]))
	must.Eq(t, u+" default - unplanned not planned yet: the next round decides", row(lines[10]), must.Sprint("no place: after those with one"))
	must.Eq(t, v2+" vision 1 of 2 policy fifo starts jobs in order; not this one yet", row(lines[11]), must.Sprint("one line each"))
	_, why, ok := strings.Cut(lines[12], " quota  ")
	must.True(t, ok, must.Sprint(lines[12]))
	why = strings.TrimLeft(why, " ")
	must.Eq(t, maxWaitChars, utf8.RuneCountInString(why))
	must.StrHasSuffix(t, "…", why)
	must.StrHasPrefix(t, v1+"  ", lines[12])
	must.StrNotContains(t, out, "stale")

	must.Eq(t, ExitOK, h.run("job", "list", "-verbose"))
	must.StrContains(t, h.out.String(), strings.TrimSpace(long))

	must.Eq(t, ExitOK, h.run("job", "list", "-json"))
	stubs := decodeOut[[]api.JobStub](t, &h.out)
	must.Nil(t, stubs[0].Wait)
	must.Eq(t, waits[v1], *stubs[1].Wait)
	must.Eq(t, structs.NotPlanned, *stubs[4].Wait)

	sentence := long + "; 2nd of 2 waiting in queue vision"
	must.Eq(t, ExitOK, h.run("job", "status", v1))
	must.StrContains(t, h.out.String(), "Waiting      = "+sentence)
	must.Eq(t, ExitOK, h.run("job", "status", a))
	must.StrNotContains(t, h.out.String(), "Waiting")

	must.Eq(t, ExitOK, h.run("job", "status", "-json", v1))
	must.Eq(t, sentence, decodeOut[structs.Job](t, &h.out).Waiting)
}
