package redisstore

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"
)

// HookCluster installs, on every node of the Cluster client cc, a hook
// that keeps a command whose reply was lost from running twice. go-redis's
// Cluster client retries a command whose connection broke after it was
// sent (EOF, a read timeout) on the same or another node, whatever
// MaxRetries says; an EVALSHA so retried may have been applied already and
// would count twice. The hook turns those errors into lost replies that
// are never retried, and reloads the slot map when a node fails at the
// connection level (a killed master: its slots will be served by a
// promoted replica), so the client follows a failover at once. Call it
// once, before cc runs a command.
func HookCluster(cc *redis.ClusterClient) {
	cc.OnNewNode(func(node *redis.Client) { node.AddHook(clusterHook{cluster: cc}) })
}

// clusterHook, on every node of a Cluster client, reloads the slot map when
// a node fails at the connection level (a killed master: its slots will be
// served by a promoted replica) and makes an error after the command was
// sent unretryable.
type clusterHook struct{ cluster *redis.ClusterClient }

func (h clusterHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			h.cluster.ReloadState(ctx)
		}
		return conn, err
	}
}

func (h clusterHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.sent(ctx, next(ctx, cmd))
	}
}

func (h clusterHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.sent(ctx, next(ctx, cmds))
	}
}

// sent classifies the error of a command that reached a connection. A
// Redis error reply (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: the command did not
// run) and a context error (never retried) pass unchanged; so does a
// failure to get a connection (nothing was sent). Any other error means the
// connection broke with the command possibly applied: the slot map is
// reloaded, and the error becomes a lostReply, which go-redis does not
// retry.
func (h clusterHook) sent(ctx context.Context, err error) error {
	var rerr redis.Error
	var op *net.OpError
	switch {
	case err == nil, errors.As(err, &rerr), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed):
		return err
	case errors.As(err, &op) && op.Op == "dial":
		h.cluster.ReloadState(ctx)
		return err
	}
	h.cluster.ReloadState(ctx)
	return &lostReply{err: err}
}

// lostReply is a command whose connection failed after it was sent. It
// unwraps to context.DeadlineExceeded for a timeout (so the store counts a
// timeout) and to nothing else, so that go-redis sees neither an EOF nor a
// network error it would retry.
type lostReply struct{ err error }

func (e *lostReply) Error() string {
	return "reply lost, not retried (the command may have run): " + e.err.Error()
}

func (e *lostReply) Unwrap() error {
	var ne net.Error
	if errors.As(e.err, &ne) && ne.Timeout() {
		return context.DeadlineExceeded
	}
	return nil
}
