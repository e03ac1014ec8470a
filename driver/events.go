package driver

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
)

// stderrTailBytes bounds how much of a failed task's stderr its event quotes.
const stderrTailBytes = 1500

// reportFailure returns the exit hook that, when the task fails, emits a
// task event quoting the end of its stderr: why training failed shows in
// `nomad alloc status` without fetching logs.
func (d *Driver) reportFailure(cfg *drivers.TaskConfig) func(*drivers.ExitResult) {
	return func(res *drivers.ExitResult) {
		if res.Successful() {
			return
		}
		msg := fmt.Sprintf("exit code %d", res.ExitCode)
		if res.Signal != 0 {
			msg += fmt.Sprintf(", signal %d", res.Signal)
		}
		// logmon may still be flushing the last lines.
		time.Sleep(300 * time.Millisecond)
		if tail := stderrTail(cfg); tail != "" {
			msg += "; stderr: " + tail
		}
		d.eventer.EmitEvent(&drivers.TaskEvent{
			TaskID:    cfg.ID,
			AllocID:   cfg.AllocID,
			TaskName:  cfg.Name,
			Timestamp: time.Now(),
			Message:   "Task failed: " + msg,
			Annotations: map[string]string{
				"exit_code": strconv.Itoa(res.ExitCode),
			},
		})
	}
}

// stderrTail returns the end of the task's newest stderr log file.
func stderrTail(cfg *drivers.TaskConfig) string {
	if cfg.AllocDir == "" {
		return ""
	}
	logDir := cfg.TaskDir().LogDir
	matches, _ := filepath.Glob(filepath.Join(logDir, cfg.Name+".stderr.*"))
	newest, best := "", -1
	for _, m := range matches {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Ext(m), "."))
		if err == nil && n > best {
			newest, best = m, n
		}
	}
	if newest == "" {
		return ""
	}
	f, err := os.Open(newest)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > stderrTailBytes {
		_, _ = f.Seek(st.Size()-stderrTailBytes, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}
