package command

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// Issue #13 row 13: `schedulearn sim` on a trace with NaN or Inf times
// hung forever. It fails at once, naming the file and line.
func TestSimCommand_Row13_NonFiniteTimes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		must.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}
	philly := "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:00:00,60,1,60,a\n"
	pollux := "name,time,application,num_replicas,batch_size\ntoy-0,0,toy,1,256\n"
	cases := []struct {
		name, file, text, err string
	}{
		{"philly Inf duration", "p1.csv", philly + "2017-10-09 07:01:00,Inf,1,60,a\n", "p1.csv:3: duration \"Inf\""},
		{"philly NaN gpu_time", "p2.csv", philly + "2017-10-09 07:01:00,60,1,NaN,a\n", "p2.csv:3: gpu_time \"NaN\""},
		{"philly huge duration", "p3.csv", philly + "2017-10-09 07:01:00,1e300,1,60,a\n", "p3.csv:3: duration \"1e300\""},
		{"philly span beyond 50 years", "p4.csv", philly + "2099-10-09 07:01:00,60,1,60,a\n", "p4.csv:3: timestamp 2099-10-09 07:01:00 is more than"},
		{"pollux NaN time", "w1.csv", pollux + "toy-1,NaN,toy,1,256\n", "w1.csv:3: time \"NaN\""},
		{"pollux Inf time", "w2.csv", pollux + "toy-1,+Inf,toy,1,256\n", "w2.csv:3: time \"+Inf\""},
		{"pollux negative time", "w3.csv", pollux + "toy-1,-1,toy,1,256\n", "w3.csv:3: time \"-1\""},
		{"pollux NaN batch", "w4.csv", pollux + "toy-1,5,toy,1,NaN\n", "w4.csv:3: batch_size \"NaN\""},
		{"pollux replicas beyond int", "w5.csv", pollux + "toy-1,5,toy,99999999999999999999,256\n", "w5.csv:3: num_replicas"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := write(tc.file, tc.text)
			var stdout, stderr bytes.Buffer
			done := make(chan int, 1)
			go func() {
				done <- Main([]string{"sim", "-trace", path, "-apps", "../sim/testdata/apps", "-nodes", "1", "-gpus-per-node", "4",
					"-policy", "fifo", "-out", filepath.Join(dir, "out-"+tc.file)}, &stdout, &stderr)
			}()
			select {
			case code := <-done:
				must.One(t, code)
				must.StrContains(t, stderr.String(), tc.err)
			case <-time.After(2 * time.Minute):
				t.Fatalf("schedulearn sim on %s did not return within 2 minutes", tc.file)
			}
		})
	}
}
