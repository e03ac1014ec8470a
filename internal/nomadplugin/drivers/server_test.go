package drivers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	driverpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/drivers"
	sharedpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/shared"
)

// fakeDriver returns what a test sets, and records what it was given.
type fakeDriver struct {
	caps     *Capabilities
	handle   *TaskHandle
	status   *TaskStatus
	usage    *TaskResourceUsage
	exec     *ExecTaskResult
	err      error
	timeout  time.Duration
	interval time.Duration
}

func (f *fakeDriver) PluginInfo() (*base.PluginInfo, error)    { return &base.PluginInfo{}, nil }
func (f *fakeDriver) ConfigSchema() (*hclspec.Spec, error)     { return nil, nil }
func (f *fakeDriver) SetConfig(*base.Config) error             { return nil }
func (f *fakeDriver) TaskConfigSchema() (*hclspec.Spec, error) { return nil, f.err }
func (f *fakeDriver) Capabilities() (*Capabilities, error)     { return f.caps, f.err }
func (f *fakeDriver) Fingerprint(context.Context) (<-chan *Fingerprint, error) {
	return nil, f.err
}
func (f *fakeDriver) RecoverTask(*TaskHandle) error { return f.err }
func (f *fakeDriver) StartTask(*TaskConfig) (*TaskHandle, *DriverNetwork, error) {
	return f.handle, nil, f.err
}
func (f *fakeDriver) WaitTask(context.Context, string) (<-chan *ExitResult, error) {
	ch := make(chan *ExitResult)
	close(ch)
	return ch, f.err
}
func (f *fakeDriver) StopTask(_ string, timeout time.Duration, _ string) error {
	f.timeout = timeout
	return f.err
}
func (f *fakeDriver) DestroyTask(string, bool) error                        { return f.err }
func (f *fakeDriver) InspectTask(string) (*TaskStatus, error)               { return f.status, f.err }
func (f *fakeDriver) SignalTask(string, string) error                       { return f.err }
func (f *fakeDriver) TaskEvents(context.Context) (<-chan *TaskEvent, error) { return nil, f.err }
func (f *fakeDriver) TaskStats(_ context.Context, _ string, interval time.Duration) (<-chan *TaskResourceUsage, error) {
	f.interval = interval
	ch := make(chan *TaskResourceUsage, 1)
	ch <- f.usage
	close(ch)
	return ch, f.err
}
func (f *fakeDriver) ExecTask(_ string, _ []string, timeout time.Duration) (*ExecTaskResult, error) {
	f.timeout = timeout
	return f.exec, f.err
}

// statsStream collects what TaskStats sends.
type statsStream struct {
	driverpb.Driver_TaskStatsServer
	sent []*driverpb.TaskStatsResponse
}

func (s *statsStream) Context() context.Context { return context.Background() }
func (s *statsStream) Send(m *driverpb.TaskStatsResponse) error {
	s.sent = append(s.sent, m)
	return nil
}

func code(err error) codes.Code { return status.Code(err) }

func TestServer_Durations(t *testing.T) {
	f := &fakeDriver{}
	s := &server{impl: f}
	ctx := context.Background()

	_, err := s.StopTask(ctx, &driverpb.StopTaskRequest{TaskId: "t", Timeout: durationpb.New(3 * time.Second)})
	must.NoError(t, err)
	must.Eq(t, 3*time.Second, f.timeout)
	_, err = s.StopTask(ctx, &driverpb.StopTaskRequest{TaskId: "t"})
	must.NoError(t, err)
	must.Zero(t, f.timeout, must.Sprint("an absent timeout is 0"))
	_, err = s.StopTask(ctx, &driverpb.StopTaskRequest{TaskId: "t", Timeout: &durationpb.Duration{Seconds: 1, Nanos: -1}})
	must.Eq(t, codes.InvalidArgument, code(err))
	must.ErrorContains(t, err, "invalid timeout")
	_, err = s.ExecTask(ctx, &driverpb.ExecTaskRequest{TaskId: "t", Command: []string{"x"}, Timeout: &durationpb.Duration{Nanos: 2e9}})
	must.Eq(t, codes.InvalidArgument, code(err))

	f.usage = &TaskResourceUsage{}
	must.NoError(t, s.TaskStats(&driverpb.TaskStatsRequest{TaskId: "t"}, &statsStream{}))
	must.Eq(t, DefaultStatsInterval, f.interval, must.Sprint("no interval: the agent's default"))
	must.NoError(t, s.TaskStats(&driverpb.TaskStatsRequest{TaskId: "t", CollectionInterval: durationpb.New(5 * time.Second)}, &statsStream{}))
	must.Eq(t, 5*time.Second, f.interval)
	err = s.TaskStats(&driverpb.TaskStatsRequest{TaskId: "t", CollectionInterval: &durationpb.Duration{Seconds: -1, Nanos: 1}}, &statsStream{})
	must.Eq(t, codes.InvalidArgument, code(err))
}

// What the agent reads without a nil check is always there, whatever the
// driver left out.
func TestServer_FillsWhatTheAgentReads(t *testing.T) {
	ctx := context.Background()
	f := &fakeDriver{status: &TaskStatus{ID: "t", State: TaskStateRunning}, usage: &TaskResourceUsage{}, exec: &ExecTaskResult{}}
	s := &server{impl: f}

	insp, err := s.InspectTask(ctx, &driverpb.InspectTaskRequest{TaskId: "t"})
	must.NoError(t, err)
	must.NotNil(t, insp.GetTask().GetStartedAt())
	must.NotNil(t, insp.GetTask().GetCompletedAt())
	must.NotNil(t, insp.GetTask().GetResult())
	must.NotNil(t, insp.GetDriver())
	got := statusFromProto(insp)
	must.True(t, got.StartedAt.IsZero() && got.CompletedAt.IsZero(), must.Sprint("zero times read back as zero"))

	stream := &statsStream{}
	must.NoError(t, s.TaskStats(&driverpb.TaskStatsRequest{TaskId: "t"}, stream))
	must.SliceLen(t, 1, stream.sent)
	st := stream.sent[0].GetStats()
	must.Eq(t, "t", st.GetId())
	must.NotNil(t, st.GetTimestamp(), must.Sprint("now when the driver gives none"))
	must.NotNil(t, st.GetAggResourceUsage().GetCpu())
	must.NotNil(t, st.GetAggResourceUsage().GetMemory())

	ex, err := s.ExecTask(ctx, &driverpb.ExecTaskRequest{TaskId: "t", Command: []string{"x"}})
	must.NoError(t, err)
	must.NotNil(t, ex.GetResult())

	// A handle without a config would be skipped by the agent's recovery.
	f.handle = &TaskHandle{Version: 1}
	resp, err := s.StartTask(ctx, &driverpb.StartTaskRequest{Task: &driverpb.TaskConfig{Id: "t", Name: "n"}})
	must.NoError(t, err)
	must.Eq(t, "t", resp.GetHandle().GetConfig().GetId())
}

func TestServer_RefusesWhatItCannotCarry(t *testing.T) {
	ctx := context.Background()
	f := &fakeDriver{}
	s := &server{impl: f}
	_, err := s.StartTask(ctx, &driverpb.StartTaskRequest{Task: &driverpb.TaskConfig{Id: "t"}})
	must.Eq(t, codes.Internal, code(err))
	must.ErrorContains(t, err, "no task handle")
	_, err = s.InspectTask(ctx, &driverpb.InspectTaskRequest{TaskId: "t"})
	must.ErrorContains(t, err, "no task status")
	_, err = s.ExecTask(ctx, &driverpb.ExecTaskRequest{TaskId: "t", Command: []string{"x"}})
	must.ErrorContains(t, err, "no exec result")
	_, err = s.Capabilities(ctx, &driverpb.CapabilitiesRequest{})
	must.ErrorContains(t, err, "no capabilities")
	f.caps = &Capabilities{FSIsolation: "overlay"}
	_, err = s.Capabilities(ctx, &driverpb.CapabilitiesRequest{})
	must.ErrorContains(t, err, `unknown filesystem isolation "overlay"`)
	f.caps = &Capabilities{NetIsolationModes: []NetIsolationMode{"bridge"}}
	_, err = s.Capabilities(ctx, &driverpb.CapabilitiesRequest{})
	must.ErrorContains(t, err, `unknown network isolation mode "bridge"`)
	f.handle, f.status = &TaskHandle{}, &TaskStatus{NetworkOverride: &DriverNetwork{PortMap: map[string]int{"http": 70000}}}
	_, err = s.InspectTask(ctx, &driverpb.InspectTaskRequest{TaskId: "t"})
	must.ErrorContains(t, err, "http = 70000 is not a port")

	// WaitTask's channel closed without a result.
	_, err = s.WaitTask(ctx, &driverpb.WaitTaskRequest{TaskId: "t"})
	must.ErrorContains(t, err, ErrChannelClosed.Error())
}

func TestStatusError(t *testing.T) {
	must.NoError(t, statusError(nil))
	err := statusError(fmt.Errorf("failed to start: %w", NewRecoverableError(errors.New("disk full"), true)))
	st, _ := status.FromError(err)
	must.Eq(t, codes.FailedPrecondition, st.Code())
	must.Eq(t, "failed to start: disk full", st.Message())
	must.SliceLen(t, 1, st.Details())
	must.True(t, st.Details()[0].(*sharedpb.RecoverableError).GetRecoverable())

	must.Eq(t, codes.NotFound, code(statusError(fmt.Errorf("stop: %w", ErrTaskNotFound))))
	must.Eq(t, codes.InvalidArgument, code(statusError(&hclspec.KeyError{Key: "k", Reason: "r"})))
	must.Eq(t, codes.Unknown, code(statusError(errors.New("boom"))))
	already := status.Error(codes.Aborted, "x")
	must.Eq(t, already, statusError(already))

	// The client reads them back.
	c := &Client{done: context.Background()}
	var rec *RecoverableError
	must.True(t, errors.As(c.callError(c.done, err), &rec))
	must.True(t, rec.Recoverable)
	must.Eq(t, "failed to start: disk full", rec.Error())
	must.ErrorIs(t, c.callError(c.done, statusError(ErrTaskNotFound)), ErrTaskNotFound)
	must.ErrorIs(t, c.callError(c.done, statusError(&hclspec.KeyError{})), ErrInvalidArgument)
	must.False(t, IsRecoverable(NewRecoverableError(errors.New("x"), false)))
	must.Nil(t, NewRecoverableError(nil, true))
}
