package command

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy/host"
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
	// No deadlines, no deadline report.
	must.StrNotContains(t, string(js), `"deadlines"`)
	must.StrNotContains(t, md, "satisfaction")
}

func TestSimCommand_Deadlines(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "philly.csv")
	must.NoError(t, os.WriteFile(trace, []byte(strings.Join([]string{
		"timestamp,duration,num_gpus,gpu_time,cluster",
		"2017-10-09 07:00:00,600,1,600,a",
		"2017-10-09 07:01:00,60,2,120,a",
		"2017-10-09 09:00:00,60,1,60,b", // after the window
	}, "\n")), 0o644))
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	// lambda 1, linear speedups, 2 GPUs: fifo starts the first job on 2
	// GPUs at 0 (done at 300, due at 600); the second waits for them until
	// the round at 300 and runs 60 s on its 2 GPUs: done at 360 (a JCT of
	// 300), due at 120.
	// Both could meet their deadlines alone.
	code := Main([]string{"sim", "-trace", trace, "-deadlines", "-lambda", "1,1", "-serial", "0,0", "-seed", "5",
		"-from", "2017-10-09T07:00:00", "-to", "2017-10-09T08:00:00",
		"-nodes", "1", "-gpus-per-node", "2", "-policy", "fifo,edf,qoe", "-gantt=false", "-out", out}, &stdout, &stderr)
	must.Zero(t, code, must.Sprint(stderr.String()))
	md := stdout.String()
	must.StrContains(t, md, "2 jobs submitted from 2017-10-09 07:00:00 to 2017-10-09 08:00:00.")
	must.StrContains(t, md, "Deadlines (derived, seed 5;")
	must.StrContains(t, md, "lambda uniform in [1, 1)")
	must.StrContains(t, md, "| fifo | 2 | 1 | 0.500 | 1.000 | 300 | 300 | 300 | 240 |")
	must.StrContains(t, md, "| fifo (elastic) | 2 |")
	// The deadline-aware builtins run on the same jobs.
	must.StrContains(t, md, "| edf | 2 | ")
	must.StrContains(t, md, "| qoe | 2 | ")
	must.StrNotContains(t, md, "Gantt")
	js, err := os.ReadFile(filepath.Join(out, "results.json"))
	must.NoError(t, err)
	must.StrContains(t, string(js), `"satisfaction_ratio": 0.5`)
	must.StrContains(t, string(js), `"seed": 5`)
	must.StrContains(t, string(js), `"from": "2017-10-09 07:00:00"`)
	for _, f := range []string{"results.md", "jct-cdf.svg", "utilization.svg"} {
		_, err := os.Stat(filepath.Join(out, f))
		must.NoError(t, err)
	}
	_, err = os.Stat(filepath.Join(out, "gantt-fifo.svg"))
	must.ErrorIs(t, err, os.ErrNotExist)

	// A bad flag value is a usage error (2); a window no job of the
	// trace falls in fails the replay (1).
	cases := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"bad lambda", []string{"-deadlines", "-lambda", "x"}, ExitUsage, `-lambda "x" is not <min>,<max>`},
		{"lambda zero", []string{"-deadlines", "-lambda", "0,1"}, ExitUsage, "lambda range [0, 1]"},
		{"serial one", []string{"-deadlines", "-serial", "0,1"}, ExitUsage, "serial fraction range"},
		{"bad from", []string{"-from", "yesterday"}, ExitUsage, `-from "yesterday" is not`},
		{"bad deadline admission", []string{"-deadlines", "-deadline-admission", "drop"}, ExitUsage, `deadline admission "drop" is not warn or reject`},
		{"deadline admission with queues", []string{"-deadlines", "-deadline-admission", "reject", "-queues", "vc"}, ExitUsage,
			"-deadline-admission applies without -queues"},
		{"empty window", []string{"-from", "2018-01-01"}, ExitError, "no job of"},
		{"backwards window", []string{"-from", "2018-01-01", "-to", "2017-01-01"}, ExitError, "is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			must.Eq(t, tc.code, Main(append([]string{"sim", "-trace", trace, "-policy", "fifo"}, tc.args...), &stdout, &stderr))
			must.StrContains(t, stderr.String(), tc.err)
		})
	}
}

func TestSimCommand_Errors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "philly.csv")
	must.NoError(t, os.WriteFile(bad, []byte("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:00:00,x,2,1200,a\n"), 0o644))
	// Usage errors (no -trace, a bad flag value) exit 2, as every
	// command's do; a trace with a bad line fails the replay (1).
	cases := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no trace", []string{"sim"}, ExitUsage, "no -trace"},
		{"bad line", []string{"sim", "-trace", bad}, ExitError, bad + ":2: duration \"x\""},
		{"unknown policy", []string{"sim", "-trace", bad, "-policy", "nope"}, ExitUsage, `policy "nope" is not a builtin`},
		{"bad config", []string{"sim", "-trace", bad, "-policy-config", "fifo"}, ExitUsage, "is not <policy>:<key>=<value>"},
		{"bad launcher", []string{"sim", "-trace", bad, "-launcher", "x"}, ExitUsage, `launcher "x"`},
		{"bad jobs", []string{"sim", "-trace", bad, "-jobs", "x"}, ExitUsage, `jobs mode "x"`},
		{"an argument", []string{"sim", "-trace", bad, "extra"}, ExitUsage, "this command takes no arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			must.Eq(t, tc.code, Main(tc.args, &stdout, &stderr))
			must.StrContains(t, stderr.String(), tc.err)
		})
	}
}

// "all" expands into every builtin in one order, the order of the published
// tables (docs/sim), every time: the builtins beyond the first five come by
// name, not in map order.
func TestResolvePolicies_All(t *testing.T) {
	want := []string{"fifo", "elastic-fifo", "round-robin", "tiresias", "goodput", "goodput-jct", "edf", "qoe"}
	for range 20 {
		got, err := resolvePolicies(host.NewRegistry("", nil), []string{"all"})
		must.NoError(t, err)
		must.Eq(t, want, got)
	}
}

// -cpuprofile and -memprofile write Go profiles (gzipped protobuf, as go
// tool pprof reads them) of the replay; a profile that cannot be created
// fails the command before the replay.
func TestSimCommand_Profiles(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "philly.csv")
	must.NoError(t, os.WriteFile(trace, []byte("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:00:00,600,2,1200,a\n"), 0o644))
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	var stdout, stderr bytes.Buffer
	code := Main([]string{"sim", "-trace", trace, "-nodes", "1", "-gpus-per-node", "4", "-policy", "fifo",
		"-cpuprofile", cpu, "-memprofile", mem}, &stdout, &stderr)
	must.Zero(t, code, must.Sprint(stderr.String()))
	for _, f := range []string{cpu, mem} {
		b, err := os.ReadFile(f)
		must.NoError(t, err)
		must.True(t, len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b, must.Sprintf("%s is not a gzipped profile", f))
	}

	stderr.Reset()
	code = Main([]string{"sim", "-trace", trace, "-policy", "fifo", "-cpuprofile", filepath.Join(dir, "no", "cpu.prof")},
		&stdout, &stderr)
	must.Eq(t, ExitError, code)
	must.StrContains(t, stderr.String(), "failed to create CPU profile")
}
