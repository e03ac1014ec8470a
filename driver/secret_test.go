package driver

import (
	"testing"

	"github.com/shoenig/test/must"
)

// Issue 13, row 1: the worker token derived from the client config's
// auth_secret (default "") and the public namespace and job ID, so anyone
// who reached a worker's port ran commands on it. Now a task starts only
// with a secret of its own job in its environment (from a template), never
// from the job spec, and the client config's auth_secret plays no part.
func TestDriver_RefusesTaskWithoutJobSecret(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		tc     func() *TaskConfig
		secret string // the task environment's HOROVOD_DRIVER_SECRET
		want   string
	}{
		{"worker without secret", workerTaskConfig, "", "no HOROVOD_DRIVER_SECRET in its environment"},
		{"launcher without secret", func() *TaskConfig { return launcherConfig("true") }, "", "no HOROVOD_DRIVER_SECRET in its environment"},
		{"short secret", workerTaskConfig, "0123456789", "at least 32"},
		{"secret in the job spec", func() *TaskConfig {
			tc := workerTaskConfig()
			tc.Env = map[string]string{"HOROVOD_DRIVER_SECRET": testSecret}
			return tc
		}, testSecret, "must not be in the job spec"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			td := newTestDriver(t)
			td.d.config.AuthSecret = "" // the old default: tokens derived from public values
			task := td.newTaskLogs(t, "task", c.tc(), map[string]string{
				"HOROVOD_DRIVER_SECRET": c.secret,
				"NOMAD_ADDR_horovod":    freeAddr(t),
			}, false)
			_, _, err := td.h.StartTask(task)
			must.ErrorContains(t, err, c.want)
		})
	}
}

func workerTaskConfig() *TaskConfig {
	return &TaskConfig{Role: RoleWorker, Slots: 1, Port: "horovod"}
}
