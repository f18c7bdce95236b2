package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestClusterHookNeverRetriesASentCommand: an error after a command was
// sent (EOF, a reset, a read timeout) reaches go-redis as a lostReply,
// which it does not retry (no EOF, no network error inside; a timeout
// still reads as context.DeadlineExceeded for the store's timeout count);
// errors that mean the command did not run pass unchanged.
func TestClusterHookNeverRetriesASentCommand(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	h := clusterHook{cluster: cc}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		name     string
		err      error
		lost     bool
		deadline bool
	}{
		{"nil", nil, false, false},
		{"EOF after sending", io.EOF, true, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, true, false},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true, false},
		{"read timeout", timeout, true, true},
		{"dial refused (never sent)", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false, false},
		{"MOVED (did not run)", replyErr("MOVED 3999 127.0.0.1:6381"), false, false},
		{"CLUSTERDOWN", replyErr("CLUSTERDOWN The cluster is down"), false, false},
		{"context deadline", context.DeadlineExceeded, false, true},
		{"pool timeout (never sent)", redis.ErrPoolTimeout, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := h.sent(context.Background(), tc.err)
			var lr *lostReply
			if errors.As(got, &lr) != tc.lost {
				t.Fatalf("sent(%v) = %v; lostReply %v, want %v", tc.err, got, !tc.lost, tc.lost)
			}
			if tc.lost && (errors.Is(got, io.EOF) || errors.Is(got, io.ErrUnexpectedEOF) || errors.As(got, new(net.Error)) && !tc.deadline) {
				t.Errorf("lostReply %v still unwraps to a retryable error", got)
			}
			if errors.Is(got, context.DeadlineExceeded) != tc.deadline {
				t.Errorf("sent(%v) = %v; is DeadlineExceeded %v, want %v", tc.err, got, !tc.deadline, tc.deadline)
			}
		})
	}
}

// replyErr is an error reply from Redis, as go-redis reports one.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}
