package driver

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/driver/supervisor"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
)

// taskHandle is the driver's in-memory view of one running task.
type taskHandle struct {
	runner     supervisor.Runner
	logger     hclog.Logger
	taskConfig *drivers.TaskConfig
	role       string

	mu          sync.RWMutex
	procState   drivers.TaskState
	startedAt   time.Time
	completedAt time.Time
	exitResult  *drivers.ExitResult

	// done is closed once the process has exited and exitResult is set.
	done chan struct{}
	// onExit, if set, runs once the process has exited, before done closes.
	onExit func(*drivers.ExitResult)
}

func newTaskHandle(r supervisor.Runner, cfg *drivers.TaskConfig, role string, startedAt time.Time, logger hclog.Logger) *taskHandle {
	return &taskHandle{
		runner:     r,
		logger:     logger,
		taskConfig: cfg,
		role:       role,
		procState:  drivers.TaskStateRunning,
		startedAt:  startedAt,
		done:       make(chan struct{}),
	}
}

// run waits for the process to exit and records how it ended.
func (h *taskHandle) run() {
	exit, err := h.runner.Wait(context.Background())
	res := &drivers.ExitResult{}
	if err != nil {
		res.Err = err
		res.ExitCode = -1
	} else {
		res.ExitCode = exit.ExitCode
		res.Signal = exit.Signal
		res.OOMKilled = exit.OOMKilled
	}
	if h.onExit != nil {
		h.onExit(res)
	}

	h.mu.Lock()
	h.exitResult = res
	h.completedAt = time.Now()
	if err != nil {
		h.procState = drivers.TaskStateUnknown
	} else {
		h.procState = drivers.TaskStateExited
		h.completedAt = exit.Time
	}
	h.mu.Unlock()
	close(h.done)
}

func (h *taskHandle) status() *drivers.TaskStatus {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return &drivers.TaskStatus{
		ID:          h.taskConfig.ID,
		Name:        h.taskConfig.Name,
		State:       h.procState,
		StartedAt:   h.startedAt,
		CompletedAt: h.completedAt,
		ExitResult:  h.exitResult.Copy(),
		DriverAttributes: map[string]string{
			"pid":  strconv.Itoa(h.runner.Pid()),
			"role": h.role,
		},
	}
}

func (h *taskHandle) isRunning() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.procState == drivers.TaskStateRunning
}

func (h *taskHandle) result() *drivers.ExitResult {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.exitResult.Copy()
}

// taskStore holds the driver's task handles by task ID.
type taskStore struct {
	mu    sync.RWMutex
	tasks map[string]*taskHandle
}

func newTaskStore() *taskStore { return &taskStore{tasks: map[string]*taskHandle{}} }

func (s *taskStore) set(id string, h *taskHandle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[id] = h
}

func (s *taskStore) get(id string) (*taskHandle, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.tasks[id]
	return h, ok
}

func (s *taskStore) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tasks, id)
}
