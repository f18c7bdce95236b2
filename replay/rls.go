package replay

import (
	"context"
	"fmt"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/rls"
)

// MaxRLSSamples is how many calls decided otherwise than logged a
// Report lists.
const MaxRLSSamples = 10

// RLSReport is what the rate limit service's calls decided in a replay.
type RLSReport struct {
	// Calls is the number of call lines replayed.
	Calls int64
	// AsLogged counts the calls decided as the log says (the overall code
	// and every descriptor's); Otherwise those decided differently.
	AsLogged, Otherwise int64
	// StoreErrors counts the calls logged as a store failure: their
	// logged answer was on_error's, so they are replayed, not compared.
	StoreErrors int64
	// Dropped counts the descriptors the log left out of its lines (the
	// line's bound): those calls replay without them.
	Dropped int64
	// Rules has one entry per rule with a rate limit, in configuration
	// order, including rules no call reached.
	Rules []*LimitReport
	// Samples are the first MaxRLSSamples calls decided otherwise.
	Samples []RLSSample
}

// RLSSample is one call decided otherwise than logged.
type RLSSample struct {
	At                 time.Time
	Domain             string
	Logged, Replayed   string   // overall codes
	LoggedD, ReplayedD []string // descriptor codes
}

// rlsReplay decides call lines through the rate limit service's own
// decision path (rls.Server.ShouldRateLimit) on the replay's store and
// clock.
type rlsReplay struct {
	srv    *rls.Server
	rep    *RLSReport
	limits map[*ratelimit.Limit]*LimitReport
	logged *accesslog.RLSCall // the line being replayed (LogCall compares)
	at     time.Time          // its logged instant
}

func newRLSReplay(p *policy.Policy, store ratelimit.Store, now func() time.Time, rep *RLSReport) (*rlsReplay, error) {
	r := &rlsReplay{rep: rep, limits: make(map[*ratelimit.Limit]*LimitReport)}
	var snap rls.Snapshot
	if p.RLS != nil {
		snap.Config = p.RLS.Config
		for _, rule := range p.RLS.Config.Rules() {
			if rule.Limit == nil {
				continue
			}
			lr := &LimitReport{Name: rule.Limit.Name, Algorithm: rule.Limit.Algorithm, Shadow: rule.Shadow}
			rep.Rules = append(rep.Rules, lr)
			r.limits[rule.Limit] = lr
		}
	}
	srv, err := rls.New(rls.Options{Store: store, Local: store, Now: now, Observer: r, CallLog: r}, snap)
	if err != nil {
		return nil, err
	}
	r.srv = srv
	return r, nil
}

// request builds the call a line logged. A hashed value is sent as
// logged: the same value always hashed alike, so it still counts on a
// counter of its own.
func rlsRequest(c *accesslog.RLSCall) *rlpb.RateLimitRequest {
	req := &rlpb.RateLimitRequest{Domain: c.Domain, HitsAddend: c.HitsAddend,
		Descriptors: make([]*commonpb.RateLimitDescriptor, len(c.Descriptors))}
	for i := range c.Descriptors {
		d := &c.Descriptors[i]
		pd := &commonpb.RateLimitDescriptor{Entries: make([]*commonpb.RateLimitDescriptor_Entry, len(d.Entries))}
		for j, e := range d.Entries {
			pd.Entries[j] = &commonpb.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value}
		}
		if d.HasAddend {
			pd.HitsAddend = wrapperspb.UInt64(d.Addend)
		}
		req.Descriptors[i] = pd
	}
	return req
}

// decide replays one call line.
func (r *rlsReplay) decide(ctx context.Context, at time.Time, req *rlpb.RateLimitRequest, logged *accesslog.RLSCall) {
	r.at = at
	r.rep.Calls++
	r.rep.Dropped += int64(logged.Dropped)
	r.logged = logged
	// A request the service refuses (no descriptor) is counted as
	// decided otherwise: the log says it was answered.
	if _, err := r.srv.ShouldRateLimit(ctx, req); err != nil && r.logged != nil {
		r.differ(logged, "refused: "+err.Error(), nil)
	}
	r.logged = nil
}

// LogCall implements rls.CallLogger: the replayed answer beside the
// logged one.
func (r *rlsReplay) LogCall(c *rls.Call) {
	logged := r.logged
	if logged == nil {
		return
	}
	r.logged = nil
	if logged.Code == "" || anyStoreError(logged) {
		r.rep.StoreErrors++
		return
	}
	overall := "ok"
	if c.Overall == rlpb.RateLimitResponse_OVER_LIMIT {
		overall = "over_limit"
	}
	same := overall == logged.Code && len(c.Codes) == len(logged.Descriptors)
	for i := 0; same && i < len(c.Codes); i++ {
		same = c.Codes[i] == logged.Descriptors[i].Code
	}
	if same {
		r.rep.AsLogged++
		return
	}
	r.differ(logged, overall, c.Codes)
}

func anyStoreError(c *accesslog.RLSCall) bool {
	for i := range c.Descriptors {
		if c.Descriptors[i].Code == rls.CodeStoreError {
			return true
		}
	}
	return false
}

func (r *rlsReplay) differ(logged *accesslog.RLSCall, overall string, codes []string) {
	r.rep.Otherwise++
	if len(r.rep.Samples) >= MaxRLSSamples {
		return
	}
	s := RLSSample{At: r.at, Domain: logged.Domain, Logged: logged.Code, Replayed: overall, ReplayedD: append([]string(nil), codes...)}
	for i := range logged.Descriptors {
		s.LoggedD = append(s.LoggedD, logged.Descriptors[i].Code)
	}
	r.rep.Samples = append(r.rep.Samples, s)
}

// ObserveCall implements rls.Observer: each rule's tally.
func (r *rlsReplay) ObserveCall(_ time.Time, hits []ratelimit.Hit, ds []ratelimit.Decision, _ []string, _ time.Duration, err error) {
	if err != nil {
		return
	}
	for i := range hits {
		if lr := r.limits[hits[i].Limit]; lr != nil {
			tallyDecision(lr, &ds[i])
		}
	}
}

// tallyDecision adds one decision to a limit's counts and peak.
func tallyDecision(r *LimitReport, d *ratelimit.Decision) {
	r.Requests++
	if d.Allowed {
		r.Allowed++
	} else {
		r.Denied++
	}
	if used := d.Limit - d.Remaining; d.Limit > 0 && used*r.PeakLimit > r.PeakUsed*d.Limit || r.PeakLimit == 0 {
		r.PeakUsed, r.PeakLimit = used, d.Limit
	}
}

// String is the sample as the report prints it.
func (s RLSSample) String() string {
	return fmt.Sprintf("%s %s: logged %s %v, replayed %s %v", s.At.UTC().Format(time.RFC3339Nano), s.Domain,
		s.Logged, s.LoggedD, s.Replayed, s.ReplayedD)
}
