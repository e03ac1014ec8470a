package command

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func TestSimCommand(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "philly.csv")
	must.NoError(t, os.WriteFile(trace, []byte(strings.Join([]string{
		"timestamp,duration,num_gpus,gpu_time,cluster",
		"2017-10-09 07:00:00,600,2,1200,a",
		"2017-10-09 07:01:00,60,1,60,a",
		"2017-10-09 07:02:00,60,16,960,b",
	}, "\n")), 0o644))
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := Main([]string{"sim", "-trace", trace, "-nodes", "2", "-gpus-per-node", "4",
		"-policy", "fifo,tiresias", "-policy", "goodput", "-policy-config", "tiresias:queue_thresholds=100", "-out", out},
		&stdout, &stderr)
	must.Zero(t, code, must.Sprint(stderr.String()))
	md := stdout.String()
	must.StrContains(t, md, "| fifo (rigid) | 2 |")
	must.StrContains(t, md, "| goodput (rigid) | 2 |")
	// The impossible job is counted and listed.
	must.StrContains(t, md, "3 jobs; 1 skipped")
	must.StrContains(t, md, "philly-000004 (line 4): needs 16 GPUs, the cluster has 8")
	for _, f := range []string{"results.json", "results.md", "jct-cdf.svg", "utilization.svg", "gantt-fifo.svg", "gantt-tiresias.svg"} {
		_, err := os.Stat(filepath.Join(out, f))
		must.NoError(t, err)
	}
	js, err := os.ReadFile(filepath.Join(out, "results.json"))
	must.NoError(t, err)
	must.StrContains(t, string(js), `"reason": "needs 16 GPUs, the cluster has 8"`)
}

func TestSimCommand_Errors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "philly.csv")
	must.NoError(t, os.WriteFile(bad, []byte("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:00:00,x,2,1200,a\n"), 0o644))
	cases := []struct {
		name string
		args []string
		err  string
	}{
		{"no trace", []string{"sim"}, "no -trace"},
		{"bad line", []string{"sim", "-trace", bad}, bad + ":2: duration \"x\""},
		{"unknown policy", []string{"sim", "-trace", bad, "-policy", "nope"}, `policy "nope" is not a builtin`},
		{"bad config", []string{"sim", "-trace", bad, "-policy-config", "fifo"}, "is not <policy>:<key>=<value>"},
		{"bad launcher", []string{"sim", "-trace", bad, "-launcher", "x"}, `launcher "x"`},
		{"bad jobs", []string{"sim", "-trace", bad, "-jobs", "x"}, `jobs mode "x"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			must.One(t, Main(tc.args, &stdout, &stderr))
			must.StrContains(t, stderr.String(), tc.err)
		})
	}
}
