package drivers

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/internal/relay"
	driverpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/drivers"
	sharedpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/shared"
)

// Client is the agent's side of a driver (base and driver services): it
// makes each call as Nomad's agent makes it, with the same messages. The
// project's tests use it to drive a driver.
//
// Errors keep the driver's message. Besides base.CallError's mapping, a
// driver's ErrTaskNotFound satisfies errors.Is(err, ErrTaskNotFound), and a
// recoverable error comes back as a *RecoverableError.
type Client struct {
	*base.Client
	rpc  driverpb.DriverClient
	done context.Context
}

var (
	_ DriverPlugin               = (*Client)(nil)
	_ ExecTaskStreamingRawDriver = (*Client)(nil)
)

// NewClient returns a client on conn; done ends with the plugin.
func NewClient(done context.Context, conn grpc.ClientConnInterface) *Client {
	return &Client{Client: base.NewClient(done, conn), rpc: driverpb.NewDriverClient(conn), done: done}
}

// remoteError is an error of the driver's, by its message, that matches a
// sentinel of this package.
type remoteError struct {
	msg string
	is  error
}

func (e *remoteError) Error() string        { return e.msg }
func (e *remoteError) Is(target error) bool { return target == e.is }

func (c *Client) callError(req context.Context, err error) error {
	err = base.CallError(c.done, req, err)
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	for _, d := range st.Details() {
		if rec, ok := d.(*sharedpb.RecoverableError); ok {
			return &RecoverableError{Err: errors.New(st.Message()), Recoverable: rec.GetRecoverable()}
		}
	}
	switch st.Code() {
	case codes.NotFound:
		return &remoteError{msg: st.Message(), is: ErrTaskNotFound}
	case codes.InvalidArgument:
		return &remoteError{msg: st.Message(), is: ErrInvalidArgument}
	}
	return err
}

// ErrInvalidArgument matches the errors a request the driver (or the SDK's
// server) refused as malformed comes back with: no task ID, a config that
// does not fit the schema, an invalid duration.
var ErrInvalidArgument = errors.New("invalid argument")

// TaskConfigSchema asks for the task config schema.
func (c *Client) TaskConfigSchema() (*hclspec.Spec, error) {
	resp, err := c.rpc.TaskConfigSchema(c.done, &driverpb.TaskConfigSchemaRequest{})
	if err != nil {
		return nil, c.callError(c.done, err)
	}
	return resp.GetSpec(), nil
}

// Capabilities asks what the driver can do.
func (c *Client) Capabilities() (*Capabilities, error) {
	resp, err := c.rpc.Capabilities(c.done, &driverpb.CapabilitiesRequest{})
	if err != nil {
		return nil, c.callError(c.done, err)
	}
	return capabilitiesFromProto(resp.GetCapabilities()), nil
}

// Fingerprint opens the fingerprint stream; cancelling ctx closes it. A
// stream that ends with an error yields a last Fingerprint with Err.
func (c *Client) Fingerprint(ctx context.Context) (<-chan *Fingerprint, error) {
	sctx, cancel := relay.JoinContexts(ctx, c.done)
	s, err := c.rpc.Fingerprint(sctx, &driverpb.FingerprintRequest{})
	if err != nil {
		cancel()
		return nil, c.callError(ctx, err)
	}
	out := make(chan *Fingerprint, 1)
	go func() {
		defer cancel()
		relay.Receive(ctx, s, out, fingerprintFromProto,
			func(err error) *Fingerprint { return &Fingerprint{Err: err} }, c.streamError(ctx))
	}()
	return out, nil
}

func (c *Client) streamError(ctx context.Context) func(error) error {
	return func(err error) error { return c.callError(ctx, err) }
}

// RecoverTask hands the driver a handle, as the agent does after the
// driver restarted (the request's task ID is left empty, as the agent
// leaves it).
func (c *Client) RecoverTask(h *TaskHandle) error {
	_, err := c.rpc.RecoverTask(c.done, &driverpb.RecoverTaskRequest{Handle: handleToProto(h)})
	return c.callError(c.done, err)
}

// StartTask starts a task.
func (c *Client) StartTask(cfg *TaskConfig) (*TaskHandle, *DriverNetwork, error) {
	resp, err := c.rpc.StartTask(c.done, &driverpb.StartTaskRequest{Task: taskConfigToProto(cfg)})
	if err != nil {
		return nil, nil, c.callError(c.done, err)
	}
	return handleFromProto(resp.GetHandle()), networkFromProto(resp.GetNetworkOverride()), nil
}

// WaitTask waits in the background: the channel gets one result (with Err
// set when the call failed) and is closed.
func (c *Client) WaitTask(ctx context.Context, taskID string) (<-chan *ExitResult, error) {
	out := make(chan *ExitResult, 1)
	go func() {
		defer close(out)
		rctx, cancel := relay.JoinContexts(ctx, c.done)
		defer cancel()
		res := &ExitResult{}
		resp, err := c.rpc.WaitTask(rctx, &driverpb.WaitTaskRequest{TaskId: taskID})
		if err != nil {
			res.Err = c.callError(ctx, err)
		} else {
			if r := exitResultFromProto(resp.GetResult()); r != nil {
				res = r
			}
			if resp.GetErr() != "" {
				res.Err = errors.New(resp.GetErr())
			}
		}
		out <- res
	}()
	return out, nil
}

// StopTask stops a task.
func (c *Client) StopTask(taskID string, timeout time.Duration, signal string) error {
	_, err := c.rpc.StopTask(c.done, &driverpb.StopTaskRequest{TaskId: taskID, Timeout: durationpb.New(timeout), Signal: signal})
	return c.callError(c.done, err)
}

// DestroyTask destroys a task.
func (c *Client) DestroyTask(taskID string, force bool) error {
	_, err := c.rpc.DestroyTask(c.done, &driverpb.DestroyTaskRequest{TaskId: taskID, Force: force})
	return c.callError(c.done, err)
}

// InspectTask asks for a task's status.
func (c *Client) InspectTask(taskID string) (*TaskStatus, error) {
	resp, err := c.rpc.InspectTask(c.done, &driverpb.InspectTaskRequest{TaskId: taskID})
	if err != nil {
		return nil, c.callError(c.done, err)
	}
	return statusFromProto(resp), nil
}

// TaskStats opens a task's statistics stream; cancelling ctx closes it.
// Unlike the agent's client it waits for the first statistics, so that an
// error (an unknown task) is returned here rather than only ending the
// stream.
func (c *Client) TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *TaskResourceUsage, error) {
	sctx, cancel := relay.JoinContexts(ctx, c.done)
	s, err := c.rpc.TaskStats(sctx, &driverpb.TaskStatsRequest{TaskId: taskID, CollectionInterval: durationpb.New(interval)})
	if err != nil {
		cancel()
		return nil, c.callError(ctx, err)
	}
	first, err := s.Recv()
	if err != nil {
		cancel()
		if errors.Is(err, io.EOF) {
			out := make(chan *TaskResourceUsage)
			close(out)
			return out, nil
		}
		return nil, c.callError(ctx, err)
	}
	out := make(chan *TaskResourceUsage, 1)
	out <- statsFromProto(first.GetStats())
	go func() {
		defer cancel()
		defer close(out)
		for {
			resp, err := s.Recv()
			if err != nil {
				return // as the agent: the stream's end closes the channel
			}
			select {
			case out <- statsFromProto(resp.GetStats()):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TaskEvents opens the task events stream; cancelling ctx closes it. A
// stream that ends with an error yields a last TaskEvent with Err.
func (c *Client) TaskEvents(ctx context.Context) (<-chan *TaskEvent, error) {
	sctx, cancel := relay.JoinContexts(ctx, c.done)
	s, err := c.rpc.TaskEvents(sctx, &driverpb.TaskEventsRequest{})
	if err != nil {
		cancel()
		return nil, c.callError(ctx, err)
	}
	out := make(chan *TaskEvent, 1)
	go func() {
		defer cancel()
		relay.Receive(ctx, s, out, eventFromProto,
			func(err error) *TaskEvent { return &TaskEvent{Err: err} }, c.streamError(ctx))
	}()
	return out, nil
}

// SignalTask signals a task.
func (c *Client) SignalTask(taskID string, signal string) error {
	_, err := c.rpc.SignalTask(c.done, &driverpb.SignalTaskRequest{TaskId: taskID, Signal: signal})
	return c.callError(c.done, err)
}

// ExecTask runs a command in a task's context.
func (c *Client) ExecTask(taskID string, cmd []string, timeout time.Duration) (*ExecTaskResult, error) {
	resp, err := c.rpc.ExecTask(c.done, &driverpb.ExecTaskRequest{TaskId: taskID, Command: cmd, Timeout: durationpb.New(timeout)})
	if err != nil {
		return nil, c.callError(c.done, err)
	}
	return &ExecTaskResult{Stdout: resp.GetStdout(), Stderr: resp.GetStderr(), ExitResult: exitResultFromProto(resp.GetResult())}, nil
}

// ExecTaskStreamingRaw runs an interactive exec as the agent does for
// `nomad alloc exec`: the setup first, then what execStream.Recv yields
// (until it returns an error; io.EOF ends the input quietly), while the
// driver's output and exit go to execStream.Send. It returns when the
// driver ends the stream; cancelling ctx ends it early.
func (c *Client) ExecTaskStreamingRaw(ctx context.Context, taskID string, command []string, tty bool, execStream ExecTaskStream) error {
	sctx, cancel := relay.JoinContexts(ctx, c.done)
	defer cancel()
	s, err := c.rpc.ExecTaskStreaming(sctx)
	if err != nil {
		return c.callError(ctx, err)
	}
	setup := &driverpb.ExecTaskStreamingRequest{Setup: &driverpb.ExecTaskStreamingRequest_Setup{TaskId: taskID, Command: command, Tty: tty}}
	if err := s.Send(setup); err != nil {
		return c.callError(ctx, err)
	}
	inputErr := make(chan error, 1)
	go func() {
		for {
			m, err := execStream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					inputErr <- err
				}
				return
			}
			if m == nil {
				continue
			}
			if err := s.Send(execRequestToProto(m)); err != nil {
				return // the stream has ended; Recv below says how
			}
		}
	}()
	for {
		select {
		case err := <-inputErr:
			return err
		default:
		}
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.callError(ctx, err)
		}
		if err := execStream.Send(execResponseFromProto(resp)); err != nil {
			return err
		}
	}
}
