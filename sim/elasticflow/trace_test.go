package elasticflow_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/sim"
	"github.com/schedulearn/schedulearn/sim/elasticflow"
)

const (
	shared        = "../../../shared/traces/elasticflow"
	clusterHeader = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration"
	phillyHeader  = "job_id,submit_time,real_iteration,model_name,ddl,batch_size,num_gpu,real_duration,duration,iteration"
)

// throughputs are the measured tables, from testdata (a copy of
// throughputs_A100/, so the tests run without the shared traces).
func throughputs(t testing.TB) *elasticflow.Throughputs {
	t.Helper()
	tp, err := elasticflow.LoadThroughputs("testdata/throughputs_A100")
	must.NoError(t, err)
	return tp
}

func parse(t *testing.T, text string) (*elasticflow.Trace, error) {
	t.Helper()
	return elasticflow.ParseTrace(strings.NewReader(text), "t.csv", throughputs(t))
}

func TestParseTrace_KeepsEachJobsDeadline(t *testing.T) {
	tr, err := parse(t, clusterHeader+"\n"+
		"b,200,45775,resnet50,1933904,256,64,2429\n"+
		"a,100,11197,gpt2,2002204,128,1,1532\n")
	must.NoError(t, err)
	must.Eq(t, "t", tr.Name)
	must.Eq(t, []elasticflow.Job{
		{ID: "a", Line: 3, Submit: 100, Deadline: 2002204, Iterations: 11197, Model: "gpt2", Batch: 128, GPUs: 1, Duration: 1532},
		{ID: "b", Line: 2, Submit: 200, Deadline: 1933904, Iterations: 45775, Model: "resnet50", Batch: 256, GPUs: 64, Duration: 2429},
	}, tr.Jobs)
}

func TestParseTrace_PhillyTakesTheIterationColumn(t *testing.T) {
	tr, err := parse(t, phillyHeader+"\n3,251699,83535,bert,279709,128,1,23367,23000,80000\n")
	must.NoError(t, err)
	must.Eq(t, elasticflow.Job{ID: "3", Line: 2, Submit: 251699, Deadline: 279709, Iterations: 80000, Model: "bert", Batch: 128, GPUs: 1, Duration: 23000}, tr.Jobs[0])
}

func TestParseTrace_RefusesBadRows(t *testing.T) {
	cases := []struct{ name, row, want string }{
		{"negative submission", "a,-1,10,bert,100,64,1,10", `t.csv:2: submission_time "-1" is not a whole number`},
		{"negative deadline", "a,1,10,bert,-100,64,1,10", `t.csv:2: deadline "-100" is not`},
		{"deadline before submission", "a,100,10,bert,99,64,1,10", "t.csv:2: deadline 99 is before the submission 100"},
		{"unknown model", "a,1,10,alexnet,100,64,1,10", `t.csv:2: model "alexnet" has no throughput table`},
		{"unmeasured batch", "a,1,10,bert,100,32,1,10", `t.csv:2: model "bert" has no measured throughput at batch size 32`},
		{"too few columns", "a,1,10,bert,100,64,1", "t.csv:2: 7 fields, want 8"},
		{"too many columns", "a,1,10,bert,100,64,1,10,3", "t.csv:2: 9 fields, want 8"},
		{"not a number", "a,1,ten,bert,100,64,1,10", `t.csv:2: num_iteration "ten" is not a whole number`},
		{"fraction", "a,1.5,10,bert,100,64,1,10", `t.csv:2: submission_time "1.5" is not`},
		{"no iterations", "a,1,0,bert,100,64,1,10", `t.csv:2: num_iteration "0" is not`},
		{"no gpus", "a,1,10,bert,100,64,0,10", `t.csv:2: num_gpu "0" is not`},
		{"overflow", "a,99999999999999999999,10,bert,100,64,1,10", `t.csv:2: submission_time "99999999999999999999"`},
		{"empty id", ",1,10,bert,100,64,1,10", `t.csv:2: job_id "" is not a job name (1 to 63 letters`},
		{"control in id", "a\x00\x80b,1,10,bert,100,64,1,10", `t.csv:2: job_id "a\x00\x80b" is not a job name`},
		{"slash in id", "a/b,1,10,bert,100,64,1,10", `t.csv:2: job_id "a/b" is not a job name`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := parse(t, clusterHeader+"\n"+c.row+"\n")
			must.Nil(t, tr)
			must.ErrorContains(t, err, c.want)
			var pe *sim.ParseError
			must.True(t, errors.As(err, &pe))
			must.Eq(t, 2, pe.Line)
		})
	}
	_, err := parse(t, clusterHeader+"\na,1,10,bert,100,64,1,10\na,2,10,bert,100,64,1,10\n")
	must.ErrorContains(t, err, `t.csv:3: job_id "a" is also on line 2`)
	_, err = parse(t, "id,time\n")
	must.ErrorContains(t, err, "t.csv:1: header is")
	_, err = parse(t, "")
	must.ErrorContains(t, err, "t.csv: empty file")
}

// TestLoadTrace_Shared reads the traces the fidelity table replays.
func TestLoadTrace_Shared(t *testing.T) {
	if _, err := os.Stat(shared); err != nil {
		t.Skip("no shared ElasticFlow traces")
	}
	tp, err := elasticflow.LoadThroughputs(filepath.Join(shared, "throughputs_A100"))
	must.NoError(t, err)
	for name, n := range map[string]int{"cluster01": 1595, "cluster02": 5778, "cluster03": 3011, "cluster04": 15802, "cluster05": 3629, "philly_103959": 876} {
		tr, err := elasticflow.LoadTrace(filepath.Join(shared, "traces", name+".csv"), tp)
		must.NoError(t, err)
		must.Len(t, n, tr.Jobs, must.Sprint(name))
	}
}

func FuzzParseTrace(f *testing.F) {
	for _, name := range []string{"cluster01", "philly_103959"} {
		if data, err := os.ReadFile(filepath.Join(shared, "traces", name+".csv")); err == nil {
			lines := strings.SplitN(string(data), "\n", 21)
			f.Add(strings.Join(lines[:len(lines)-1], "\n") + "\n")
		}
	}
	for _, row := range []string{"a,1,10,bert,100,64,1,10\nb,0,5,vgg16,0,256,8,3", "a,-1,10,bert,100,64,1,10", "a,1,10,bert,0,64,1,10", "a,1,10,x,100,64,1,10", "a,1,1e3,bert,100,64,1,10", "to\x00\x801,1,10,bert,100,64,1,10"} {
		f.Add(clusterHeader + "\n" + row + "\n")
	}
	f.Add(phillyHeader + "\n0,0,1282877,vgg16,771220,256,1,976570,976570,1282877\n")
	tp := throughputs(f)
	f.Fuzz(func(t *testing.T, text string) {
		tr, err := elasticflow.ParseTrace(strings.NewReader(text), "f.csv", tp)
		if err != nil {
			must.Nil(t, tr)
			var pe *sim.ParseError
			must.True(t, errors.As(err, &pe), must.Sprintf("not a ParseError: %v", err))
			must.StrHasPrefix(t, "f.csv:", err.Error())
			return
		}
		for i, j := range tr.Jobs {
			must.True(t, j.Submit >= 0 && j.Deadline >= j.Submit && j.Iterations >= 1 && j.GPUs >= 1)
			must.Positive(t, tp.Rate(j.Model, j.Batch, 1))
			if i > 0 {
				must.True(t, tr.Jobs[i-1].Submit <= j.Submit)
			}
		}
	})
}
