package driver

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
)

// stderrTailBytes bounds how much of a failed task's stderr its event
// quotes; stderrReadBytes how much of the file's end it reads to find it.
const (
	stderrTailBytes = 1500
	stderrReadBytes = 16 << 10
)

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
		err := d.eventer.EmitEvent(&drivers.TaskEvent{
			TaskID:    cfg.ID,
			AllocID:   cfg.AllocID,
			TaskName:  cfg.Name,
			Timestamp: time.Now(),
			Message:   "Task failed: " + msg,
			Annotations: map[string]string{
				"exit_code": strconv.Itoa(res.ExitCode),
			},
		})
		if err != nil {
			// The plugin is shutting down: the agent reads the exit code anyway.
			d.logger.Warn("task failure event not sent", "task_id", cfg.ID, "error", err)
		}
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
	if st, err := f.Stat(); err == nil && st.Size() > stderrReadBytes {
		_, _ = f.Seek(st.Size()-stderrReadBytes, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	s := summarizeStderr(string(b))
	if len(s) > stderrTailBytes {
		s = "..." + s[len(s)-stderrTailBytes:]
	}
	return s
}

// summarizeStderr drops the frames of Python tracebacks (horovodrun's own,
// when training fails): what is left is the training's stderr, which
// horovodrun prefixes with "[rank]<stderr>:", and the final error.
func summarizeStderr(s string) string {
	lines := strings.Split(s, "\n")
	var keep []string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, `File "`) && strings.HasPrefix(line, " "):
			// A frame; its source line follows, indented deeper.
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    ") {
				i++
			}
			continue
		case trimmed != "" && strings.Trim(trimmed, "^~ ") == "":
			continue // the caret markers under a frame's source line
		case trimmed == "":
			continue
		}
		keep = append(keep, line)
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}
