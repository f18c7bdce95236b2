package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

// TestGivesUpConn: a lane gives up its connection on a failure of the
// connection and on READONLY (a demoted master), and keeps it on any
// other answer of Redis.
func TestGivesUpConn(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{replyErr("ERR unknown command"), false},
		{replyErr("NOSCRIPT No matching script"), false},
		{replyErr("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{fmt.Errorf("decide: %w", replyErr("ERR Function not found")), false},
		{replyErr("READONLY You can't write against a read only replica."), true},
		{fmt.Errorf("decide: %w", replyErr("READONLY You can't write against a read only replica.")), true},
		{replyErr("READONLYX not the error"), false},
		{io.EOF, true},
		{context.DeadlineExceeded, true},
		{errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: connection reset by peer"), true},
	} {
		if got := givesUpConn(tc.err); got != tc.want {
			t.Errorf("givesUpConn(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
