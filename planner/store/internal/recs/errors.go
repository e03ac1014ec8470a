package recs

import (
	"errors"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// The store's errors. Package store exports each under the same name (its
// docs say what each means); they are defined here because the helpers
// below return them, and the implementations return them too, whichever
// package they are in, so errors.Is finds one value wherever it was made.
var (
	ErrNotFound    error = &kindError{"not found", structs.ErrNotFound}
	ErrExists            = errors.New("already exists")
	ErrConflict    error = &kindError{"version conflict", structs.ErrConflict}
	ErrInvalidID   error = &kindError{"invalid job ID", structs.ErrNotFound}
	ErrKeyExists         = errors.New("idempotency key already used")
	ErrNotFinished       = errors.New("job has not finished")
	ErrFenced      error = &kindError{"leadership term ended: this planner no longer leads", structs.ErrUnavailable}
)

// kindError is a store error that is also of one of the planner's kinds.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// ErrClosed is returned by a store used after Close.
var ErrClosed = errors.New("store is closed")

// ErrLeaderHeld is returned by a Leadership's Acquire while the leadership
// is held or being acquired (AlwaysLeader and ConsulLeadership alike).
var ErrLeaderHeld = errors.New("leadership is already held or being acquired")
