package structs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
)

// The planner's errors, shared by every layer (as Nomad's
// nomad/structs/errors.go): the store and the planner return them, wrapped
// with what and where; the HTTP API (planner/api) maps them onto status
// codes in one place and re-exports them for its clients. Compare with
// errors.Is and errors.As.
var (
	// ErrNotFound: no such job or record (404).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request contradicts the job's state, e.g. stopping
	// a job that has already ended, or a write that lost a race (409).
	ErrConflict = errors.New("conflict")
	// ErrUnavailable: the planner cannot serve now, e.g. it is starting or
	// is not the leader (503). Clients may retry.
	ErrUnavailable = errors.New("unavailable")
	// ErrIdempotencyMismatch: the idempotency key was used before with
	// another request (422).
	ErrIdempotencyMismatch = errors.New("idempotency key reused with another request")
	// ErrDeadlineRefused: a job with a deadline that cannot meet it beside
	// the jobs already admitted, refused by its queue's
	// deadline_admission = "reject" (the cause of an *InputError: 400).
	ErrDeadlineRefused = errors.New("refused by deadline admission")
)

// InputError is a request refused because of what it asks (400): a job
// asking for more GPUs than any node offers, an unknown policy. Diags,
// when set, point into the submitted jobspec.
type InputError struct {
	Msg   string
	Diags hcl.Diagnostics
	// Err, when set, is the cause (for errors.Is), e.g. quota.ErrUnknownQueue.
	Err error
}

// Unwrap returns the cause, if any.
func (e *InputError) Unwrap() error { return e.Err }

// Inputf returns an *InputError with a formatted message.
func Inputf(format string, args ...any) *InputError {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

func (e *InputError) Error() string {
	switch {
	case e.Msg != "" && len(e.Diags) > 0:
		return e.Msg + ": " + hcldiag.Format(e.Diags)
	case e.Msg != "":
		return e.Msg
	default:
		return hcldiag.Format(e.Diags)
	}
}

// IdempotencyHeader carries a submission's idempotency key: a retry of
// POST /v1/jobs with the same key and body gets the first job back, not
// a second job (the CLI sends a fresh key per `job run`).
const IdempotencyHeader = "Idempotency-Key"

// Replay is the answer to a submission whose idempotency key job already
// holds: job itself when the request is the same, else
// ErrIdempotencyMismatch.
func Replay(job *Job, idem *Idempotency) (*Job, error) {
	if job.Idempotency == nil || idem == nil || job.Idempotency.Digest != idem.Digest {
		return nil, fmt.Errorf("%s %q was used for job %s, which was submitted with another jobspec or filename; use a new key for a new job: %w",
			IdempotencyHeader, idem.Key, job.ID, ErrIdempotencyMismatch)
	}
	return job, nil
}

// ReportToken is job id's report token under the planner's token: what
// the planner gives the job's tasks (SCHEDULEARN_REPORT_TOKEN, through
// planner/nomadjob) and what POST /v1/jobs/{id}/progress accepts, for
// that job only, besides the planner's token. It is
// HMAC-SHA256(token, "schedulearn-progress:" + id) in hex: the planner
// keeps no per-job secret, the token stays the same for the job's life (a
// resize re-registers nothing), one job's token says nothing about
// another's or about the planner's, and changing the planner's token
// revokes every report token with it. Empty when the planner has no token
// (it then takes no writes at all).
func ReportToken(token, id string) string {
	if token == "" {
		return ""
	}
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("schedulearn-progress:" + id))
	return hex.EncodeToString(mac.Sum(nil))
}
