package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/internal/wire"
)

// clientPlugin is the go-plugin glue of the host: it dispenses a client that
// is a Policy. Serving is the plugin's part (policy/plugin.Serve), so GRPCServer
// refuses.
type clientPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

// GRPCServer implements plugin.GRPCPlugin; the host serves no policy.
func (p *clientPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("failed to serve a policy: the host only calls plugins; a plugin serves with plugin.Serve")
}

// GRPCClient implements plugin.GRPCPlugin. ctx ends when the plugin process
// exits; every call ends with it.
func (p *clientPlugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &wireClient{conn: conn, exited: ctx, name: "plugin", callTimeout: DefaultCallTimeout}, nil
}

// ErrPluginExited is wrapped by errors from a plugin process that has exited
// (crashed, or was killed).
var ErrPluginExited = errors.New("policy plugin exited")

// wireClient is a Policy that speaks to a plugin process.
type wireClient struct {
	conn        *grpc.ClientConn
	exited      context.Context
	name        string
	callTimeout time.Duration
	info        policy.Info
	// broken is set when a call found the connection gone; go-plugin
	// notices the exit a little later.
	broken atomic.Bool
}

func (c *wireClient) PluginInfo() policy.Info { return c.info }

func (c *wireClient) SetConfig(config map[string]string) error {
	return c.invoke(context.Background(), wire.MethodSetConfig, config, nil)
}

func (c *wireClient) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	var p policy.Plan
	if err := c.invoke(ctx, wire.MethodPlan, s, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// alive reports whether the plugin process is still running.
func (c *wireClient) alive() bool { return c.exited.Err() == nil && !c.broken.Load() }

// invoke calls method with in as JSON and decodes the reply into out. The
// call ends at ctx's deadline, or after callTimeout if ctx has none, or when
// the plugin process exits, whichever is first.
func (c *wireClient) invoke(ctx context.Context, method string, in, out any) error {
	fail := func(err error) error {
		return fmt.Errorf("policy plugin %s: failed to call %s: %w", c.name, method, err)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return fail(fmt.Errorf("failed to encode request: %w", err))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.callTimeout)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.exited, cancel)
	defer stop()

	resp := new(wrapperspb.BytesValue)
	err = c.conn.Invoke(ctx, wire.FullMethod(method), wrapperspb.Bytes(b), resp,
		grpc.MaxCallRecvMsgSize(wire.MaxMessage), grpc.MaxCallSendMsgSize(wire.MaxMessage))
	if code := status.Code(err); (code == codes.Canceled || code == codes.DeadlineExceeded) && ctx.Err() == nil {
		// The server enforces the deadline too (grpc-timeout) and may
		// cancel the stream a moment before the client's timer fires.
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	switch {
	case err == nil:
	case c.exited.Err() != nil || status.Code(err) == codes.Unavailable:
		c.broken.Store(true)
		return fail(fmt.Errorf("%w: %s", ErrPluginExited, status.Convert(err).Message()))
	case ctx.Err() != nil:
		return fail(fmt.Errorf("no answer in time: %w", context.Cause(ctx)))
	default:
		return fail(errors.New(status.Convert(err).Message()))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.GetValue(), out); err != nil {
		return fail(fmt.Errorf("failed to decode reply: %w", err))
	}
	return nil
}
