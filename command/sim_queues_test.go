package command

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// queueTrace is a Philly trace of two VCs: a with 3 GPU-hours, b with 1.
func queueTrace(t *testing.T, dir string) string {
	t.Helper()
	trace := filepath.Join(dir, "philly.csv")
	must.NoError(t, os.WriteFile(trace, []byte(strings.Join([]string{
		"timestamp,duration,num_gpus,gpu_time,cluster",
		"2017-10-09 07:00:00,3600,3,10800,a",
		"2017-10-09 07:01:00,3600,1,3600,b",
	}, "\n")), 0o644))
	return trace
}

// queueReport runs sim with args on the trace and returns results.json's
// first trace and results.md.
func queueReport(t *testing.T, args ...string) (map[string]any, string) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := Main(append([]string{"sim", "-trace", queueTrace(t, dir), "-nodes", "1", "-gpus-per-node", "8",
		"-policy", "fifo", "-out", out}, args...), &stdout, &stderr)
	must.Zero(t, code, must.Sprint(stderr.String()))
	js, err := os.ReadFile(filepath.Join(out, "results.json"))
	must.NoError(t, err)
	var rep struct {
		Traces []map[string]any `json:"traces"`
	}
	must.NoError(t, json.Unmarshal(js, &rep))
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	must.NoError(t, err)
	return rep.Traces[0], string(md)
}

func TestSimCommand_QueuesVC(t *testing.T) {
	tr, md := queueReport(t, "-queues", "vc")
	must.Eq(t, map[string]any{"a": 6.0, "b": 2.0}, tr["queues"].(map[string]any))
	must.MapNotContainsKey(t, tr, "queues_off")
	run := tr["runs"].([]any)[0].(map[string]any)
	must.Len(t, 2, run["queues"].([]any))
	must.MapContainsKey(t, run, "queue_summary")
	must.StrContains(t, md, "### Per queue")
	must.StrContains(t, md, "Queues: enforced by the planner")
	must.StrContains(t, md, "| a | 6 | 1 |")
}

func TestSimCommand_QueuesOff(t *testing.T) {
	tr, md := queueReport(t, "-queues", "vc", "-queues-enforce=false")
	must.Eq(t, true, tr["queues_off"])
	must.StrContains(t, md, "Queues: not enforced")
}

// A config file's queue blocks, read by the planner's own parser.
func TestSimCommand_QueuesFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "queues.hcl")
	must.NoError(t, os.WriteFile(file, []byte(`
queue "a" {
  nominal = 2
}
queue "b" {
  nominal         = 6
  borrowing_limit = 0
}
`), 0o644))
	tr, _ := queueReport(t, "-queues", file)
	must.Eq(t, map[string]any{"a": 2.0, "b": 6.0}, tr["queues"].(map[string]any))
}

// Without -queues, nothing per queue (the reports stay as they were).
func TestSimCommand_NoQueues(t *testing.T) {
	tr, md := queueReport(t)
	must.MapNotContainsKey(t, tr, "queues")
	run := tr["runs"].([]any)[0].(map[string]any)
	must.MapNotContainsKey(t, run, "queues")
	must.MapNotContainsKey(t, run, "queue_summary")
	must.StrNotContains(t, md, "Per queue")
}

func TestSimCommand_QueuesErrors(t *testing.T) {
	dir := t.TempDir()
	trace := queueTrace(t, dir)
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		must.NoError(t, os.WriteFile(p, []byte(src), 0o644))
		return p
	}
	cases := []struct {
		name, file, err string
	}{
		{"negative quota", write("neg.hcl", "queue \"a\" {\n  nominal = -1\n}\n"), "neg.hcl:2:"},
		{"a cycle", write("cycle.hcl", "queue \"a\" {\n  parent = \"b\"\n}\nqueue \"b\" {\n  parent = \"a\"\n}\n"), "cycle.hcl:"},
		{"no queue block", write("none.hcl", "log_level = \"INFO\"\n"), "no queue block"},
		{"no file", filepath.Join(dir, "missing.hcl"), "Failed to read config"},
		// b's job needs 1 GPU; b may hold none.
		{"a job its queue can never hold", write("small.hcl", "queue \"a\" {\n  nominal = 8\n  lending_limit = 0\n}\nqueue \"b\" {\n  nominal = 0\n  borrowing_limit = 0\n}\n"), `queue "b" may never hold`},
		{"a VC without a queue", write("onlya.hcl", "queue \"a\" {\n  nominal = 8\n}\n"), `queue "b" does not exist`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			must.Eq(t, ExitError, Main([]string{"sim", "-trace", trace, "-nodes", "1", "-gpus-per-node", "8",
				"-policy", "fifo", "-queues", tc.file}, &stdout, &stderr))
			must.StrContains(t, stderr.String(), tc.err)
		})
	}
}
