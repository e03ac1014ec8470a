package driver

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestSummarizeStderr(t *testing.T) {
	in := `[0]<stderr>:training failed: loss diverged at step 5
ERROR:root:failure count == 1 -> stop running
Traceback (most recent call last):
  File "/venv/bin/horovodrun", line 8, in <module>
    sys.exit(run_commandline())
             ^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/horovod/runner/gloo_run.py", line 351, in launch_gloo_elastic
    raise RuntimeError('Horovod detected that one or more processes exited with non-zero '
RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job to be terminated. The first process to do so was:
Process name: w-b5c4f8f9[0]
Exit code: 3

`
	must.Eq(t, `[0]<stderr>:training failed: loss diverged at step 5
ERROR:root:failure count == 1 -> stop running
Traceback (most recent call last):
RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job to be terminated. The first process to do so was:
Process name: w-b5c4f8f9[0]
Exit code: 3`, summarizeStderr(in))
}
