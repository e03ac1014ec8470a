package sshshim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schedulearn/schedulearn/internal/drain"
)

// Causes of a worker command that failed.
const (
	// CauseInfrastructure: the worker's agent could not be reached or the
	// connection broke, or the command was killed by a signal (its agent
	// was stopped, its host lost), or its agent's fence stopped it.
	CauseInfrastructure = "infrastructure"
	// CauseScript: the training program exited with a non-zero code of its
	// own.
	CauseScript = "script"
)

// Outcome is a worker command that failed, as the launcher's shim saw it:
// one line of the launcher's outcomes file (taskfile.Task.OutcomesFile).
type Outcome struct {
	Time  time.Time `json:"time"`
	Host  string    `json:"host"`
	Code  int       `json:"code"`
	Cause string    `json:"cause"`
}

// Cause is why a worker command ended with code: reached says whether its
// agent answered and reported the code. drain.ExitInfrastructure is the
// agent's word that its fence stopped the command.
func Cause(code int, reached bool) string {
	if !reached || code > 128 || code == drain.ExitInfrastructure {
		return CauseInfrastructure
	}
	return CauseScript
}

// maxOutcomesFile bounds the outcomes file: a run whose workers keep
// failing records its first failures, which say why, and stops there.
const maxOutcomesFile = 1 << 20

// RecordOutcome appends o to the outcomes file at path (one JSON line;
// each shim appends its own in one write). Nothing is written past
// maxOutcomesFile.
func RecordOutcome(path string, o Outcome) error {
	line, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("failed to encode outcome: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("failed to open outcomes file: %w", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size()+int64(len(line))+1 > maxOutcomesFile {
		return nil
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("failed to write outcomes file: %w", err)
	}
	return nil
}

// ReadOutcomes reads the outcomes file at path; a missing file is none.
// Lines it cannot decode are skipped.
func ReadOutcomes(path string) ([]Outcome, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to open outcomes file: %w", err)
	}
	defer f.Close()
	var out []Outcome
	sc := bufio.NewScanner(io.LimitReader(f, maxOutcomesFile))
	for sc.Scan() {
		var o Outcome
		if json.Unmarshal(sc.Bytes(), &o) == nil && o.Cause != "" {
			out = append(out, o)
		}
	}
	return out, sc.Err()
}
