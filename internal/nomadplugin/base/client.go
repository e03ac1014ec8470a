package base

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	basepb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/base"
)

// ErrPluginShutdown is returned by a client call when the plugin process
// has gone away.
var ErrPluginShutdown = errors.New("plugin is shut down")

// Client is the agent's side of the base service; the project's tests use
// it to drive a plugin as the agent does.
type Client struct {
	rpc basepb.BasePluginClient
	// done is cancelled by go-plugin when the plugin process exits.
	done context.Context
}

var _ BasePlugin = (*Client)(nil)

// NewClient returns a client on conn; done ends with the plugin.
func NewClient(done context.Context, conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: basepb.NewBasePluginClient(conn), done: done}
}

// PluginInfo asks the plugin what it is.
func (c *Client) PluginInfo() (*PluginInfo, error) {
	resp, err := c.rpc.PluginInfo(c.done, &basepb.PluginInfoRequest{})
	if err != nil {
		return nil, CallError(c.done, c.done, err)
	}
	var t string
	switch resp.GetType() {
	case basepb.PluginType_DEVICE:
		t = PluginTypeDevice
	case basepb.PluginType_DRIVER:
		t = PluginTypeDriver
	default:
		return nil, fmt.Errorf("plugin reports unknown type %s", resp.GetType())
	}
	return &PluginInfo{
		Type:              t,
		PluginApiVersions: resp.GetPluginApiVersions(),
		PluginVersion:     resp.GetPluginVersion(),
		Name:              resp.GetName(),
	}, nil
}

// ConfigSchema asks for the plugin's config schema.
func (c *Client) ConfigSchema() (*hclspec.Spec, error) {
	resp, err := c.rpc.ConfigSchema(c.done, &basepb.ConfigSchemaRequest{})
	if err != nil {
		return nil, CallError(c.done, c.done, err)
	}
	return resp.GetSpec(), nil
}

// SetConfig configures the plugin.
func (c *Client) SetConfig(cfg *Config) error {
	req := &basepb.SetConfigRequest{
		MsgpackConfig:    cfg.PluginConfig,
		PluginApiVersion: cfg.ApiVersion,
	}
	if d := cfg.AgentConfig; d != nil && d.Driver != nil {
		req.NomadConfig = &basepb.NomadConfig{Driver: &basepb.NomadDriverConfig{
			ClientMinPort: d.Driver.ClientMinPort,
			ClientMaxPort: d.Driver.ClientMaxPort,
			Topology:      d.Driver.Topology,
		}}
	}
	_, err := c.rpc.SetConfig(c.done, req)
	return CallError(c.done, c.done, err)
}

// CallError turns the error of a gRPC call into what a caller can test:
// ErrPluginShutdown once the plugin is gone, the request context's error
// when the caller gave up, and otherwise the plugin's own message (the
// status error, whose code is kept for status.Code). req is the call's
// context: done itself for a call that has none of its own.
func CallError(done, req context.Context, err error) error {
	if err == nil {
		return nil
	}
	if done.Err() != nil {
		return ErrPluginShutdown
	}
	if req.Err() != nil {
		return req.Err()
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable {
		return fmt.Errorf("%w: %s", ErrPluginShutdown, st.Message())
	}
	return err
}
