// Package rls serves Envoy's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) from
// Tollgate's stores: the descriptors of a request are matched against
// envoyproxy/ratelimit's configuration (package envoyconf) and decided
// together by one Store.Decide, so a request denied by one descriptor
// debits none. It knows nothing of HTTP requests; cmd/gateway runs its
// gRPC server.
package rls

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/rls/envoyconf"
)

// Bounds of one request. Envoy sends a few descriptors of a few entries;
// a request past these is refused (InvalidArgument) before anything is
// matched or counted.
const (
	// MaxDescriptors bounds the descriptors of one request.
	MaxDescriptors = 64
	// MaxEntries bounds the entries of one descriptor (deeper than any
	// configuration may nest, envoyconf.MaxDepth).
	MaxEntries = envoyconf.MaxDepth
	// MaxRecvBytes bounds one request message on the wire.
	MaxRecvBytes = 1 << 20
)

// OnError is what a store failure means for a call.
type OnError uint8

// The store.on_error choices.
const (
	// ErrorLocal decides with the local (memory) store.
	ErrorLocal OnError = iota + 1
	// ErrorAllow answers OK.
	ErrorAllow
	// ErrorDeny answers OVER_LIMIT.
	ErrorDeny
)

// Options are a Server's fixed dependencies.
type Options struct {
	// Store decides; Local decides instead when Store fails and OnError
	// is ErrorLocal.
	Store, Local ratelimit.Store
	OnError      OnError
	// Timeout bounds a store call (0: none but the caller's).
	Timeout time.Duration
	// Now is the decision clock; nil means time.Now.
	Now func() time.Time
	// Logger receives store failures, at most one line a second.
	Logger *slog.Logger
	// Meter, when set, receives the decision counter.
	Meter metric.Meter
	// Observer, when set, receives every call that decided hits.
	Observer Observer
	// CallLog, when set, receives every call answered (not those
	// refused as invalid or cancelled).
	CallLog CallLogger
}

// Observer receives the decisions of a call (for /admin/top and the
// dashboard). descriptors[i] names the descriptor of hits[i] as
// "key=value,key=value" (each value cut at 64 bytes, the whole at 256),
// or "" when its decision was allowed and not near the limit (only
// those clients are tracked, so nothing is formatted for the rest). It
// runs on the call's path and must not keep the slices.
type Observer interface {
	ObserveCall(now time.Time, hits []ratelimit.Hit, ds []ratelimit.Decision, descriptors []string, storeLatency time.Duration, storeErr error)
}

// Snapshot is what a reload swaps: the compiled files and the answer's
// settings.
type Snapshot struct {
	Config  *envoyconf.Config
	Headers bool
	// DynamicMetadata fills every answer's dynamic_metadata as the
	// reference does with RESPONSE_DYNAMIC_METADATA=true.
	DynamicMetadata bool
}

// Server answers ShouldRateLimit. Safe for concurrent use.
type Server struct {
	rlpb.UnimplementedRateLimitServiceServer
	opts      Options
	cur       atomic.Pointer[live]
	decisions metric.Int64Counter
	lastLog   atomic.Int64
	pool      sync.Pool
	// cand is the running candidate configuration (nil: none), candSem
	// bounds its decisions in flight.
	cand    atomic.Pointer[Candidate]
	candSem chan struct{}
}

// MetricDecisions counts descriptors decided, by domain, descriptor (the
// configured path, or "none" when nothing matched; never a request's
// value) and code.
const MetricDecisions = "tollgate.rls.descriptors"

// New returns a server answering from snap.
func New(opts Options, snap Snapshot) (*Server, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OnError == 0 {
		opts.OnError = ErrorLocal
	}
	s := &Server{opts: opts, candSem: make(chan struct{}, maxCandidateInFlight)}
	s.pool.New = func() any { return new(scratch) }
	s.cur.Store(&live{Snapshot: snap})
	if opts.Meter != nil {
		var err error
		s.decisions, err = opts.Meter.Int64Counter(MetricDecisions, metric.WithUnit("{descriptor}"),
			metric.WithDescription("Descriptors of rate limit service calls (ShouldRateLimit), by domain, descriptor (the configured path) and code (ok, over_limit, shadow_over_limit, unlimited, no_limit)."))
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Swap makes snap the configuration of every later call; calls in
// progress finish on the one they started with.
func (s *Server) Swap(snap Snapshot) { s.cur.Store(&live{Snapshot: snap}) }

// live is the snapshot in force and the metric attributes of its rules,
// built once per rule and code (the configuration bounds them) and
// dropped with the snapshot.
type live struct {
	Snapshot
	attrs sync.Map // metricKey → metric.MeasurementOption
}

type metricKey struct {
	r    *envoyconf.Rule
	code string
}

// Register registers s on g.
func Register(g *grpc.Server, s *Server) { rlpb.RegisterRateLimitServiceServer(g, s) }

// scratch is one call's reusable space.
type scratch struct {
	entries []envoyconf.Entry
	buf     []byte
	enc     []byte
	keys    []byte
	hits    []ratelimit.Hit
	out     []ratelimit.Decision
	at      []int // descriptor of each hit
	rules   []*envoyconf.Rule
	codes   []string // each descriptor's code (CallLog)
	byValue []uint64 // each descriptor's entries matched by value (CallLog)
	keyEnds []int    // where each matched descriptor's key ends in keys
}

// match matches every descriptor of req against cfg, as the reference
// does, into sc: the rule of each descriptor (nil for none, or for one
// another matched rule replaces) and the hits to decide, each with its
// descriptor in sc.at. With byValue it also notes which entries matched
// by value (the access log). It reports whether a matched zero-rate rule
// denies the whole call (every hit is then a peek). The live call and a
// candidate configuration both match through it, so they cannot drift.
func (sc *scratch) match(cfg *envoyconf.Config, req *rlpb.RateLimitRequest, byValue bool) (denyAll bool) {
	domain, descs := req.GetDomain(), req.GetDescriptors()
	n := len(descs)
	sc.rules = grow(sc.rules, n)
	sc.hits, sc.at, sc.keys, sc.keyEnds = sc.hits[:0], sc.at[:0], sc.keys[:0], sc.keyEnds[:0]
	for i, d := range descs {
		sc.entries = sc.entries[:0]
		for _, e := range d.GetEntries() {
			sc.entries = append(sc.entries, envoyconf.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		var m envoyconf.Match
		if l := d.GetLimit(); l != nil {
			// The request's own limit replaces the configured rules.
			m.Rule = cfg.RequestLimit(domain, l.GetRequestsPerUnit(), requestUnit(l.GetUnit()))
		} else {
			m, sc.buf = cfg.Match(domain, sc.entries, sc.buf)
		}
		sc.rules[i] = m.Rule
		if byValue {
			sc.byValue[i] = matchedByValue(&m, len(sc.entries))
		}
		if m.Rule != nil && m.Rule.Limit != nil {
			sc.keys, sc.enc = m.AppendKey(sc.keys, domain, sc.entries, sc.enc)
			sc.keyEnds = append(sc.keyEnds, len(sc.keys))
			sc.at = append(sc.at, i)
		}
	}
	// Drop the rules another matched rule replaces.
	replaced := replacedNames(sc.rules[:n])
	for i, r := range sc.rules[:n] {
		// An unlimited rule is never replaced: the reference drops it
		// from the limits to check before it looks for the names.
		if r != nil && r.Name != "" && !r.Unlimited && replaced[r.Name] {
			sc.rules[i] = nil
			continue
		}
		if r != nil && r.DenyAll && !r.Shadow {
			denyAll = true
		}
	}
	// Hits in descriptor order, each with its key (the key string is one
	// allocation shared by all).
	keys := string(sc.keys)
	start := 0
	for k, i := range sc.at {
		end := sc.keyEnds[k]
		r := sc.rules[i]
		if r == nil {
			start = end
			continue
		}
		h := ratelimit.Hit{Limit: r.Limit, Key: keys[start:end], Cost: cost(req, descs[i])}
		if h.Cost == 0 || denyAll {
			// hits_addend 0 on a descriptor asks whether one more would
			// pass without counting it; a request a zero-rate rule denies
			// counts nothing anywhere.
			h.Cost, h.Mode = 1, ratelimit.HitPeek
		}
		sc.hits = append(sc.hits, h)
		sc.at[len(sc.hits)-1] = i
		start = end
	}
	sc.at = sc.at[:len(sc.hits)]
	return denyAll
}

// ShouldRateLimit decides every descriptor of req at once.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlpb.RateLimitRequest) (*rlpb.RateLimitResponse, error) {
	domain, descs := req.GetDomain(), req.GetDescriptors()
	switch {
	case domain == "":
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	case len(descs) == 0:
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	case len(descs) > MaxDescriptors:
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors, more than %d", len(descs), MaxDescriptors)
	}
	for _, d := range descs {
		if len(d.GetEntries()) > MaxEntries {
			return nil, status.Errorf(codes.InvalidArgument, "a descriptor of %d entries, more than %d", len(d.GetEntries()), MaxEntries)
		}
		if l := d.GetLimit(); l != nil && requestUnit(l.GetUnit()) == 0 {
			// The reference's process panics on a unit without a window.
			return nil, status.Errorf(codes.InvalidArgument, "a descriptor's limit of unit %v: want SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR", l.GetUnit())
		}
	}
	snap := s.cur.Load()
	sc := s.pool.Get().(*scratch)
	defer s.pool.Put(sc)
	n := len(descs)
	now := s.opts.Now()
	callStart := time.Now()
	if s.opts.CallLog != nil {
		sc.codes, sc.byValue = grow(sc.codes, n), grow(sc.byValue, n)
	}
	denyAll := sc.match(snap.Config, req, s.opts.CallLog != nil)
	resp := &rlpb.RateLimitResponse{Statuses: make([]*rlpb.RateLimitResponse_DescriptorStatus, n)}
	sc.out = growD(sc.out, len(sc.hits))
	allowed := true
	var storeLatency time.Duration
	if len(sc.hits) > 0 {
		var err error
		t0 := time.Now()
		allowed, err = s.decide(ctx, now, sc.hits, sc.out[:len(sc.hits)])
		storeLatency = time.Since(t0)
		if s.opts.Observer != nil {
			s.observe(now, descs, sc, storeLatency, err)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			resp := s.failed(sc.rules[:n])
			if s.opts.CallLog != nil {
				s.logCall(callStart, now, req, resp, sc, storeLatency, err)
			}
			if c := s.cand.Load(); c != nil {
				// The live answer is on_error's; the candidate is
				// decided beside it all the same.
				s.candidate(c, now, req, sc.rules[:n], resp)
			}
			return resp, nil
		}
	}
	if denyAll {
		allowed = false
	}
	ds := sc.out[:len(sc.hits)]
	hitOf := make([]int, n)
	for i := range hitOf {
		hitOf[i] = -1
	}
	for k, i := range sc.at {
		hitOf[i] = k
	}
	for i, r := range sc.rules[:n] {
		st, code := descriptorStatus(r, hitOf[i], ds, now)
		resp.Statuses[i] = st
		s.count(ctx, snap, r, code)
		if s.opts.CallLog != nil {
			sc.codes[i] = code
		}
	}
	resp.OverallCode = rlpb.RateLimitResponse_OK
	if !allowed {
		resp.OverallCode = rlpb.RateLimitResponse_OVER_LIMIT
	}
	if snap.DynamicMetadata {
		resp.DynamicMetadata = dynamicMetadata(req, sc.rules[:n], resp.Statuses)
	}
	if snap.Headers && len(sc.hits) > 0 {
		resp.ResponseHeadersToAdd = rateLimitHeaders(sc.hits, ds, now)
	}
	if c := s.cand.Load(); c != nil {
		s.candidate(c, now, req, sc.rules[:n], resp)
	}
	if s.opts.CallLog != nil {
		s.logCall(callStart, now, req, resp, sc, storeLatency, nil)
	}
	return resp, nil
}

// decide calls the store, bounded by the timeout, and the local store
// when the store fails and on_error says so.
func (s *Server) decide(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	cctx := ctx
	if s.opts.Timeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
	}
	allowed, err := s.opts.Store.Decide(cctx, now, hits, out)
	if err == nil {
		return allowed, nil
	}
	s.logFailure(err)
	if s.opts.OnError == ErrorLocal && s.opts.Local != nil && s.opts.Local != s.opts.Store && ctx.Err() == nil {
		return s.opts.Local.Decide(ctx, now, hits, out)
	}
	return false, err
}

// failed answers a call whose store failed, by on_error: allow answers
// OK, deny OVER_LIMIT (local fell back already, so its failure denies).
func (s *Server) failed(rules []*envoyconf.Rule) *rlpb.RateLimitResponse {
	code := rlpb.RateLimitResponse_OVER_LIMIT
	if s.opts.OnError == ErrorAllow {
		code = rlpb.RateLimitResponse_OK
	}
	resp := &rlpb.RateLimitResponse{OverallCode: code, Statuses: make([]*rlpb.RateLimitResponse_DescriptorStatus, len(rules))}
	for i, r := range rules {
		st := &rlpb.RateLimitResponse_DescriptorStatus{Code: rlpb.RateLimitResponse_OK}
		if r != nil && r.Limit != nil {
			st.Code = code
			st.CurrentLimit = currentLimit(r)
		}
		resp.Statuses[i] = st
	}
	return resp
}

func (s *Server) logFailure(err error) {
	now := time.Now().Unix()
	if last := s.lastLog.Load(); last != now && s.lastLog.CompareAndSwap(last, now) {
		s.opts.Logger.Error("rate limit service: store failed", "err", err, "on_error", s.opts.OnError)
	}
}

// cost is a descriptor's hits: its own hits_addend when set (0 allowed:
// check only), else the request's, 0 counting as 1; at most
// ratelimit.MaxLimit (more can never be granted).
func cost(req *rlpb.RateLimitRequest, d *commonpb.RateLimitDescriptor) int64 {
	var n uint64
	if a := d.GetHitsAddend(); a != nil {
		n = a.GetValue()
	} else {
		n = max(uint64(req.GetHitsAddend()), 1)
	}
	return int64(min(n, uint64(ratelimit.MaxLimit)))
}

// observe hands the call's decisions to the observer, naming the
// descriptors of those denied or near their limit.
func (s *Server) observe(now time.Time, descs []*commonpb.RateLimitDescriptor, sc *scratch, latency time.Duration, err error) {
	ds := sc.out[:len(sc.hits)]
	names := make([]string, len(sc.hits))
	for k, i := range sc.at {
		d := &ds[k]
		if err == nil && d.Allowed && !(d.Limit > 0 && d.Remaining*10 <= d.Limit) {
			continue
		}
		names[k] = descriptorLabel(descs[i])
	}
	s.opts.Observer.ObserveCall(now, sc.hits, ds, names, latency, err)
}

// descriptorLabel is "key=value,..." of d, bounded.
func descriptorLabel(d *commonpb.RateLimitDescriptor) string {
	const maxValue, maxLabel = 64, 256
	var b []byte
	for _, e := range d.GetEntries() {
		if len(b) > 0 {
			b = append(b, ',')
		}
		k, v := e.GetKey(), e.GetValue()
		b = append(append(append(b, k[:min(len(k), maxValue)]...), '='), v[:min(len(v), maxValue)]...)
		if len(b) >= maxLabel {
			return string(b[:maxLabel])
		}
	}
	return string(b)
}

// matchedByValue is the mask of m's entries matched by value (Call.ByValue).
func matchedByValue(m *envoyconf.Match, n int) uint64 {
	var b uint64
	for j := range min(n, 64) {
		if m.ByValue(j) {
			b |= 1 << j
		}
	}
	return b
}

// replacedNames returns the names the matched rules replace (nil when
// none does).
func replacedNames(rules []*envoyconf.Rule) map[string]bool {
	var m map[string]bool
	for _, r := range rules {
		if r == nil {
			continue
		}
		for _, name := range r.Replaces {
			if m == nil {
				m = make(map[string]bool)
			}
			m[name] = true
		}
	}
	return m
}

// descriptorStatus is one descriptor's answer and its metric code.
func descriptorStatus(r *envoyconf.Rule, hit int, ds []ratelimit.Decision, now time.Time) (*rlpb.RateLimitResponse_DescriptorStatus, string) {
	switch {
	case r == nil:
		return &rlpb.RateLimitResponse_DescriptorStatus{Code: rlpb.RateLimitResponse_OK}, "no_limit"
	case r.Unlimited:
		return &rlpb.RateLimitResponse_DescriptorStatus{Code: rlpb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}, "unlimited"
	case r.DenyAll:
		st := &rlpb.RateLimitResponse_DescriptorStatus{Code: rlpb.RateLimitResponse_OVER_LIMIT, CurrentLimit: currentLimit(r),
			DurationUntilReset: durationpb.New(fixedReset(r.Unit.Duration(), now.UnixMicro()))}
		if r.Shadow {
			st.Code = rlpb.RateLimitResponse_OK
			return st, "shadow_over_limit"
		}
		return st, "over_limit"
	}
	d := &ds[hit]
	st := &rlpb.RateLimitResponse_DescriptorStatus{Code: rlpb.RateLimitResponse_OK, CurrentLimit: currentLimit(r)}
	remaining := max(d.Remaining, 0)
	code := "ok"
	if !d.Allowed {
		remaining = 0
		code = "over_limit"
		if r.Shadow {
			code = "shadow_over_limit"
		} else {
			st.Code = rlpb.RateLimitResponse_OVER_LIMIT
		}
	}
	st.LimitRemaining = uint32(min(remaining, math.MaxUint32))
	var reset time.Duration
	if r.Limit.Algorithm == ratelimit.FixedWindow {
		// The window of the instant the store decided at, aligned to the
		// epoch as the reference aligns it.
		at := now.UnixMicro()
		if d.At != 0 {
			at = d.At
		}
		reset = fixedReset(r.Limit.Rates[0].Window, at)
	} else {
		reset = max(d.Reset, d.RetryAfter)
	}
	st.DurationUntilReset = durationpb.New(reset)
	return st, code
}

// fixedReset is the time from the instant at (microseconds since the
// epoch) to the end of its window of length w, windows aligned to the
// epoch.
func fixedReset(w time.Duration, at int64) time.Duration {
	wt := int64(w / ratelimit.Tick)
	if wt <= 0 {
		return 0
	}
	return time.Duration(wt-at%wt) * ratelimit.Tick
}

var protoUnits = [...]rlpb.RateLimitResponse_RateLimit_Unit{
	envoyconf.Second: rlpb.RateLimitResponse_RateLimit_SECOND,
	envoyconf.Minute: rlpb.RateLimitResponse_RateLimit_MINUTE,
	envoyconf.Hour:   rlpb.RateLimitResponse_RateLimit_HOUR,
	envoyconf.Day:    rlpb.RateLimitResponse_RateLimit_DAY,
	envoyconf.Week:   rlpb.RateLimitResponse_RateLimit_WEEK,
	envoyconf.Month:  rlpb.RateLimitResponse_RateLimit_MONTH,
	envoyconf.Year:   rlpb.RateLimitResponse_RateLimit_YEAR,
}

// requestUnit is the unit of a descriptor's own limit, 0 when it has no
// window. The type's enum stops at YEAR (6); the reference casts the
// number to the response's unit, where 7 is WEEK, so 7 reads as WEEK.
func requestUnit(u typepb.RateLimitUnit) envoyconf.Unit {
	switch u {
	case typepb.RateLimitUnit_SECOND:
		return envoyconf.Second
	case typepb.RateLimitUnit_MINUTE:
		return envoyconf.Minute
	case typepb.RateLimitUnit_HOUR:
		return envoyconf.Hour
	case typepb.RateLimitUnit_DAY:
		return envoyconf.Day
	case typepb.RateLimitUnit_MONTH:
		return envoyconf.Month
	case typepb.RateLimitUnit_YEAR:
		return envoyconf.Year
	case 7:
		return envoyconf.Week
	}
	return 0
}

func currentLimit(r *envoyconf.Rule) *rlpb.RateLimitResponse_RateLimit {
	u := rlpb.RateLimitResponse_RateLimit_UNKNOWN
	if int(r.Unit) < len(protoUnits) {
		u = protoUnits[r.Unit]
	}
	return &rlpb.RateLimitResponse_RateLimit{Name: r.Name, RequestsPerUnit: r.RequestsPerUnit, Unit: u}
}

// count adds one descriptor to the decision metric.
func (s *Server) count(ctx context.Context, l *live, r *envoyconf.Rule, code string) {
	if s.decisions == nil {
		return
	}
	if r != nil && r.Base != nil {
		// A request's limit is labelled by its domain's request-limit
		// rule: one label set per domain, whatever the numbers.
		r = r.Base
	}
	k := metricKey{r, code}
	o, ok := l.attrs.Load(k)
	if !ok {
		// An unknown domain or descriptor is the caller's value: not a
		// label.
		domain, desc := "", "none"
		if r != nil {
			domain, desc = r.Domain, r.Path
		}
		o, _ = l.attrs.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(attribute.String("domain", domain),
			attribute.String("descriptor", desc), attribute.String("code", code))))
	}
	s.decisions.Add(ctx, 1, o.(metric.AddOption))
}

// rateLimitHeaders are the IETF RateLimit and RateLimit-Policy fields of
// the most restrictive enforced decision, as the gateway's own answers
// carry them.
func rateLimitHeaders(hits []ratelimit.Hit, ds []ratelimit.Decision, now time.Time) []*corepb.HeaderValue {
	limits := make([]*ratelimit.Limit, 0, len(hits))
	for _, h := range hits {
		limits = append(limits, h.Limit)
	}
	h := http.Header{}
	var w headers.Writer
	w.Set(h, headers.Styles{headers.IETF}, headers.PolicyValue(limits), hits, ds, now)
	var out []*corepb.HeaderValue
	for _, name := range []string{"RateLimit-Policy", "RateLimit"} {
		if v := h.Get(name); v != "" {
			out = append(out, &corepb.HeaderValue{Key: name, Value: v})
		}
	}
	return out
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func growD(s []ratelimit.Decision, n int) []ratelimit.Decision {
	if cap(s) < n {
		return make([]ratelimit.Decision, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// dynamicMetadata is the answer's dynamic_metadata as the reference
// builds it (its ratelimitToMetadata): the domain, each descriptor's
// entries ("key=value"), own limit and hits_addend, the request's
// hits_addend when not 0, and the metadata of the rules of the
// descriptors not over their limit, merged in descriptor order. rules[i]
// is nil where no rule applies (none matched, unlimited or replaced).
func dynamicMetadata(req *rlpb.RateLimitRequest, rules []*envoyconf.Rule, statuses []*rlpb.RateLimitResponse_DescriptorStatus) *structpb.Struct {
	descs := req.GetDescriptors()
	list := make([]*structpb.Value, 0, len(descs))
	for _, d := range descs {
		entries := make([]*structpb.Value, len(d.GetEntries()))
		for i, e := range d.GetEntries() {
			entries[i] = structpb.NewStringValue(e.GetKey() + "=" + e.GetValue())
		}
		f := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
		if l := d.GetLimit(); l != nil {
			// The reference writes the message's text form, whose
			// spacing its library varies on purpose; this one is fixed.
			f["limit"] = structpb.NewStringValue(fmt.Sprintf("requests_per_unit:%d unit:%v", l.GetRequestsPerUnit(), l.GetUnit()))
		}
		if a := d.GetHitsAddend(); a != nil {
			f["hitsAddend"] = structpb.NewNumberValue(float64(a.GetValue()))
		}
		list = append(list, structpb.NewStructValue(&structpb.Struct{Fields: f}))
	}
	out := map[string]*structpb.Value{
		"domain":      structpb.NewStringValue(req.GetDomain()),
		"descriptors": structpb.NewListValue(&structpb.ListValue{Values: list}),
	}
	if a := req.GetHitsAddend(); a != 0 {
		out["hitsAddend"] = structpb.NewNumberValue(float64(a))
	}
	var merged *structpb.Struct
	var owned map[*structpb.Struct]bool
	for i, r := range rules {
		if r == nil || r.Unlimited || r.Metadata == nil || statuses[i].GetCode() == rlpb.RateLimitResponse_OVER_LIMIT {
			continue
		}
		if merged == nil {
			merged = &structpb.Struct{Fields: make(map[string]*structpb.Value, len(r.Metadata.GetFields()))}
			owned = map[*structpb.Struct]bool{merged: true}
		}
		mergeMetadata(merged, r.Metadata, owned)
	}
	if len(merged.GetFields()) > 0 {
		out["metadata"] = structpb.NewStructValue(merged)
	}
	return &structpb.Struct{Fields: out}
}

// mergeMetadata merges src into dst as the reference does: a name dst
// lacks takes src's value; two mappings of one name are merged; any
// other name already in dst keeps dst's value. The rules' metadata is
// shared by every call, so a mapping of theirs is copied (one level)
// before anything is merged into it; owned holds the copies.
func mergeMetadata(dst, src *structpb.Struct, owned map[*structpb.Struct]bool) {
	for k, v := range src.GetFields() {
		dv, ok := dst.Fields[k]
		if !ok {
			dst.Fields[k] = v
			continue
		}
		ds, ss := dv.GetStructValue(), v.GetStructValue()
		if ds == nil || ss == nil {
			continue
		}
		if !owned[ds] {
			ds = &structpb.Struct{Fields: maps.Clone(ds.GetFields())}
			if ds.Fields == nil {
				ds.Fields = map[string]*structpb.Value{}
			}
			owned[ds] = true
			dst.Fields[k] = structpb.NewStructValue(ds)
		}
		mergeMetadata(ds, ss, owned)
	}
}
