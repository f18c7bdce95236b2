package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
)

// ErrRefused is wrapped (with ratelimit.ErrStore) by Ready when Redis
// answered but refused the decision script: a read-only replica, an ACL
// user without EVALSHA or EVAL, a renamed command. Unlike an unreachable
// Redis, this does not heal by waiting; the configuration is wrong.
//
//lint:ignore ST1005 Redis is a name; operators grep logs for these words.
var ErrRefused = errors.New("Redis refuses the decision script")

// probeLimit is what Ready decides on: a fixed window so large it never
// denies and so short its key expires within seconds.
var probeLimit = func() *ratelimit.Limit {
	l := &ratelimit.Limit{Name: "tollgate-readiness-probe", Algorithm: ratelimit.FixedWindow,
		Rates: []ratelimit.Rate{{Limit: ratelimit.MaxLimit, Window: time.Second}}}
	if err := l.Finish(); err != nil {
		panic("redisstore: probe limit: " + err.Error()) // a constant definition
	}
	return l
}()

// probeKey is the hit key of the readiness probe (its own hash tag).
const probeKey = "{tollgate-probe}tollgate-probe"

// Ready reports whether the store can make a decision now: the breaker is
// not open, and the decision script, loaded if Redis lacks it, counts one
// unit on a probe key (a write, as every decision is). A PING would pass on
// a read-only replica or for an ACL user without EVALSHA, where every
// decision fails. The probe bypasses the breaker: its success does not
// close it and does not reset the count of consecutive failed decisions.
//
// The error names the cause in words an operator acts on, such as
// "READONLY: the configured Redis is a replica"; it wraps ErrRefused when
// Redis answered with a refusal, and ratelimit.ErrStore always. The
// caller's context bounds the probe (loading the script may take longer
// than one decision's budget). While the breaker is open Ready answers at
// once, with the last probe's refusal if there was one. Ready is meant for
// readiness probes.
func (s *Store) Ready(ctx context.Context) error {
	if st := s.breaker.state(s.now()); st == BreakerOpen {
		// Decisions are failing fast; answer at once, with the cause of
		// the last refusal if that is what the last probe saw.
		if r := s.refused.Load(); r != nil {
			return r
		}
		return fmt.Errorf("redis store: %w: %w", ratelimit.ErrStore, ErrBreakerOpen)
	}
	s.settleEngine(ctx)
	hits := []ratelimit.Hit{{Limit: probeLimit, Key: probeKey, Cost: 1}}
	var out [1]ratelimit.Decision
	_, _, err := s.decideHits(ctx, s.client, modeDecide, s.now(), hits, out[:], nil, nil)
	if err == nil {
		s.refused.Store(nil)
		return nil
	}
	err = s.probeError(err)
	var r *refusal
	if errors.As(err, &r) {
		s.refused.Store(r)
	}
	return err
}

// probeError turns a failed probe's error into one that names its cause.
func (s *Store) probeError(err error) error {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		//lint:ignore ST1005 Redis is a name; operators grep logs for these words.
		return fmt.Errorf("Redis not reachable: %w: %w", ratelimit.ErrStore, err)
	}
	msg := err.Error()
	var cause string
	switch {
	case strings.HasPrefix(msg, "READONLY"), strings.Contains(msg, "READONLY You can't write"):
		cause = "READONLY: the configured Redis is a replica; point store.redis at the master"
	case strings.HasPrefix(msg, "NOPERM"):
		cause = fmt.Sprintf("NOPERM: user %s may not run %s", s.username(), quotedCommand(msg, "evalsha"))
	case strings.Contains(msg, "unknown command"):
		cmd := quotedCommand(msg, "evalsha")
		cause = fmt.Sprintf("%s is renamed or disabled on this Redis (the store needs FUNCTION LOAD and FCALL, or EVALSHA and EVAL)",
			strings.ToUpper(cmd))
	case strings.HasPrefix(msg, "NOAUTH"), strings.HasPrefix(msg, "WRONGPASS"):
		cause = "authentication failed: check the Redis username and password"
	default:
		cause = "the decision script failed"
	}
	return &refusal{cause: cause, err: err}
}

// refusal is a probe refused by Redis: its message is the cause an
// operator acts on, followed by Redis's own words.
type refusal struct {
	cause string
	err   error
}

// Error returns the cause and Redis's reply, cut before the arguments
// Redis echoes for an unknown command (packed binary).
func (r *refusal) Error() string {
	said, _, _ := strings.Cut(r.err.Error(), ", with args beginning with")
	return r.cause + " (Redis said: " + said + ")"
}

func (r *refusal) Unwrap() []error { return []error{ratelimit.ErrStore, ErrRefused, r.err} }

// quotedCommand returns the first 'quoted' word of a Redis error message
// (the command it names), lower case, or def when there is none.
func quotedCommand(msg, def string) string {
	i := strings.IndexByte(msg, '\'')
	if i < 0 {
		return def
	}
	j := strings.IndexByte(msg[i+1:], '\'')
	if j <= 0 {
		return def
	}
	return strings.ToLower(msg[i+1 : i+1+j])
}

// username is the ACL user the client authenticates as, for messages.
func (s *Store) username() string {
	var u string
	switch c := s.client.(type) {
	case *redis.Client:
		u = c.Options().Username
	case *redis.ClusterClient:
		u = c.Options().Username
	}
	if u == "" {
		return "default"
	}
	return u
}
