// Package relay turns gRPC server streams into Go channels and back, for
// the plugin services' streaming RPCs (fingerprints, statistics, events).
package relay

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
)

// Forward sends what a plugin's channel yields until it is closed, the
// caller goes away (ctx), or send fails. nil values are skipped. The
// plugin's channel must end with ctx too.
func Forward[T any](ctx context.Context, ch <-chan *T, send func(*T) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case v, ok := <-ch:
			if !ok {
				return nil
			}
			if v == nil {
				continue
			}
			if err := send(v); err != nil {
				return err
			}
		}
	}
}

// Receive turns a stream into a channel: one value per message (conv),
// then, if the stream ended with an error other than the caller's own
// cancellation, one value carrying it (fail, given the error as
// callError makes it); then it closes out.
func Receive[P, T any](ctx context.Context, stream grpc.ServerStreamingClient[P], out chan<- *T,
	conv func(*P) *T, fail func(error) *T, callError func(error) error) {
	defer close(out)
	for {
		msg, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				select {
				case out <- fail(callError(err)):
				case <-ctx.Done():
				}
			}
			return
		}
		select {
		case out <- conv(msg):
		case <-ctx.Done():
			return
		}
	}
}

// JoinContexts is cancelled when a or b is, or cancel is called.
func JoinContexts(a, b context.Context) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	context.AfterFunc(ctx, func() { stop() })
	return ctx, cancel
}
