package command

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

// sim -model elasticflow names the model in use, replays each trace on its
// cluster and refuses a bad row with file:line.
func TestSimCommand_ElasticFlowModel(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		must.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}
	tp := "../sim/elasticflow/testdata/throughputs_A100"
	spec := write("n1g8.csv", "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,1,8,64,256\n")
	head := "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"
	good := write("good.csv", head+"a,0,1000,bert,1000,64,1,100\nb,0,100000,bert,5000,64,1,100\n")
	var out, errOut bytes.Buffer
	c := &SimCommand{Out: &out, Err: &errOut}
	must.Eq(t, ExitOK, c.Run([]string{"-model", "elasticflow", "-throughputs", tp, "-cluster", spec, "-trace", good, "-policy", "edf"}), must.Sprint(errOut.String()))
	must.StrContains(t, out.String(), "Job model: elasticflow")
	must.StrContains(t, out.String(), "| good | 8 | 2 | edf | 0.500 |")

	bad := write("bad.csv", head+"a,100,1000,bert,99,64,1,100\n")
	out.Reset()
	must.Eq(t, ExitError, c.Run([]string{"-model", "elasticflow", "-throughputs", tp, "-cluster", spec, "-trace", bad}))
	must.StrContains(t, errOut.String(), "bad.csv:2: deadline 99 is before the submission 100")
}
