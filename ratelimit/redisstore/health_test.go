package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestHealthLogsOnce: a run of failed checks logs once per kind of
// failure (an outage alternating between "unreachable" and "breaker open"
// is one), and once more when decisions work again.
func TestHealthLogsOnce(t *testing.T) {
	var buf bytes.Buffer
	errs := []error{
		errors.New("Redis not reachable: dial tcp: connection refused"),
		redisstore.ErrBreakerOpen,
		errors.New("Redis not reachable: dial tcp: connection refused"),
		nil, nil,
		fmt.Errorf("NOPERM: user tg may not run evalsha: %w", redisstore.ErrRefused),
		fmt.Errorf("NOPERM: user tg may not run evalsha: %w", redisstore.ErrRefused),
	}
	i := 0
	h := &redisstore.Health{Ready: func(context.Context) error { i++; return errs[i-1] }, Log: slog.New(slog.NewTextHandler(&buf, nil))}
	for range errs {
		h.Check(context.Background())
	}
	if n := strings.Count(buf.String(), "cannot make a decision"); n != 2 {
		t.Errorf("%d failure lines, want 2 (the outage, the refusal); log:\n%s", n, buf.String())
	}
	if n := strings.Count(buf.String(), "makes decisions again"); n != 1 {
		t.Errorf("%d recovery lines, want 1; log:\n%s", n, buf.String())
	}
}
