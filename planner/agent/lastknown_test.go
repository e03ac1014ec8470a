package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// A store that stops answering (the chaos run froze the Consul server:
// GET /v1/jobs hung, then answered 500) no longer fails the API's job
// reads once it has answered a list: they are bounded, and answer the
// records read last; a job the store says does not exist stays not
// found, and with nothing read before, the error comes through.
func TestLastKnown_AnswersTheLastListWhileTheStoreDoesNot(t *testing.T) {
	down := errors.New("Unexpected response code: 500 (No known Consul servers)")
	fail := func(context.Context) ([]*structs.Job, error) { return nil, down }
	hang := func(ctx context.Context) ([]*structs.Job, error) { <-ctx.Done(); return nil, ctx.Err() }
	getFail := func(context.Context, string) (*structs.Job, error) { return nil, down }

	tests := []struct {
		name string
		run  func(t *testing.T, k *lastKnown)
	}{
		{"nothing read before: the error", func(t *testing.T, k *lastKnown) {
			_, err := k.list(context.Background(), fail)
			must.ErrorIs(t, err, down)
			_, err = k.job(context.Background(), "a", getFail)
			must.ErrorIs(t, err, down)
		}},
		{"a failing store: the last list", func(t *testing.T, k *lastKnown) {
			k.keep([]*structs.Job{{ID: "a", State: structs.JobRunning}, {ID: "b"}})
			jobs, err := k.list(context.Background(), fail)
			must.NoError(t, err)
			must.Len(t, 2, jobs)
			jobs[0].State = structs.JobFailed // a copy
			j, err := k.job(context.Background(), "a", getFail)
			must.NoError(t, err)
			must.Eq(t, structs.JobRunning, j.State)
			_, err = k.job(context.Background(), "c", getFail)
			must.ErrorIs(t, err, down, must.Sprint("a job the last list does not hold"))
		}},
		{"a store that never answers: bounded", func(t *testing.T, k *lastKnown) {
			k.keep([]*structs.Job{{ID: "a"}})
			start := time.Now()
			jobs, err := k.list(context.Background(), hang)
			must.NoError(t, err)
			must.Len(t, 1, jobs)
			must.Less(t, time.Second, time.Since(start))
		}},
		{"not found stays not found", func(t *testing.T, k *lastKnown) {
			k.keep([]*structs.Job{{ID: "a"}})
			_, err := k.job(context.Background(), "a", func(context.Context, string) (*structs.Job, error) {
				return nil, structs.ErrNotFound
			})
			must.ErrorIs(t, err, structs.ErrNotFound)
		}},
		{"a caller that gave up: its error", func(t *testing.T, k *lastKnown) {
			k.keep([]*structs.Job{{ID: "a"}})
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := k.list(ctx, hang)
			must.ErrorIs(t, err, context.Canceled)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newLastKnown(hclog.NewNullLogger())
			k.timeout = 50 * time.Millisecond
			tc.run(t, k)
		})
	}
}
