// Package candidate runs a candidate configuration beside the live one:
// it records where the two would decide a request differently (per limit,
// per client, the first diverging requests) and serves that record, and
// the candidate's installation, removal and promotion, on the admin
// listener.
package candidate

import (
	"crypto/rand"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/proxy"
)

// Bounds of what a candidate keeps, whatever the traffic.
const (
	// MaxClients is the number of distinct diverging clients counted; a
	// new client past it replaces the one counted least (its count is
	// then an over-estimate by at most the replaced one's, as in
	// Space-Saving).
	MaxClients = 256
	// MaxSamples is the number of first diverging requests kept.
	MaxSamples = 50
	// TopClients is the number of clients a report lists.
	TopClients = 10
)

// Stats records the outcomes of one candidate. It is safe for concurrent
// use; a request on which both configurations agree costs two atomic
// additions.
type Stats struct {
	started time.Time
	// show is how a client appears in the record.
	show func(kind, value string) string

	requests, agreeAllowed, agreeDenied atomic.Int64
	extra, fewer, storeErrors           atomic.Int64

	mu      sync.Mutex
	limits  map[string]*LimitDiff
	clients map[string]*ClientCount
	samples []Sample
}

// LimitDiff counts one limit's disagreements.
type LimitDiff struct {
	// ExtraDenials counts requests the live configuration allowed and
	// this candidate limit denied.
	ExtraDenials int64 `json:"extra_denials"`
	// FewerDenials counts requests this live limit denied and the
	// candidate allowed.
	FewerDenials int64 `json:"fewer_denials"`
}

// ClientCount is one client's disagreements, by its hash.
type ClientCount struct {
	Client string `json:"client"`
	Kind   string `json:"kind"`
	Extra  int64  `json:"extra_denials"`
	Fewer  int64  `json:"fewer_denials"`
	// Error is the most the counts may be over by (inherited from the
	// client this one replaced).
	Error int64 `json:"error"`
}

// Sample is one diverging request.
type Sample struct {
	At              time.Time `json:"at"`
	Method          string    `json:"method"`
	Path            string    `json:"path"`
	Client          string    `json:"client,omitempty"`
	Kind            string    `json:"kind,omitempty"`
	LiveDenied      []string  `json:"live_denied"`
	CandidateDenied []string  `json:"candidate_denied"`
}

// NewStats returns empty Stats started at now. show is how a client
// appears in the record (the gateway passes the access log's form); nil
// hashes it with a random salt of these Stats' own.
func NewStats(now time.Time, show func(kind, value string) string) *Stats {
	if show == nil {
		salt := make([]byte, 16)
		_, _ = rand.Read(salt)
		show = func(kind, value string) string { return accesslog.Hash(salt, kind, value) }
	}
	return &Stats{started: now, show: show, limits: make(map[string]*LimitDiff), clients: make(map[string]*ClientCount)}
}

// Record is a proxy.Candidate's Record.
func (s *Stats) Record(o *proxy.CandidateOutcome) {
	s.requests.Add(1)
	if o.Err != nil {
		s.storeErrors.Add(1)
		return
	}
	live, cand := len(o.LiveDenied) > 0, len(o.CandidateDenied) > 0
	switch {
	case live == cand:
		if live {
			s.agreeDenied.Add(1)
		} else {
			s.agreeAllowed.Add(1)
		}
		return
	case cand:
		s.extra.Add(1)
	default:
		s.fewer.Add(1)
	}
	// Identities are shown as show makes them (hashed unless the
	// operator allowed raw values; API keys never raw).
	client := ""
	if o.Client != "" {
		client = s.show(o.ClientKind, o.Client)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cand {
		for _, n := range o.CandidateDenied {
			s.limit(n).ExtraDenials++
		}
	} else {
		for _, n := range o.LiveDenied {
			s.limit(n).FewerDenials++
		}
	}
	if client != "" {
		c := s.client(client, o.ClientKind)
		if cand {
			c.Extra++
		} else {
			c.Fewer++
		}
	}
	if len(s.samples) < MaxSamples {
		s.samples = append(s.samples, Sample{At: o.At, Method: o.Method, Path: o.Path, Client: client, Kind: o.ClientKind,
			LiveDenied: slices.Clone(o.LiveDenied), CandidateDenied: slices.Clone(o.CandidateDenied)})
	}
}

// limit returns the diff of the limit named n, made on first use. The
// names are the two configurations' own, so their number is bounded.
func (s *Stats) limit(n string) *LimitDiff {
	d := s.limits[n]
	if d == nil {
		d = new(LimitDiff)
		s.limits[n] = d
	}
	return d
}

// client returns the count of client, replacing the least counted one
// when MaxClients are held.
func (s *Stats) client(client, kind string) *ClientCount {
	if c := s.clients[client]; c != nil {
		return c
	}
	c := &ClientCount{Client: client, Kind: kind}
	if len(s.clients) >= MaxClients {
		var minKey string
		var min *ClientCount
		for k, v := range s.clients {
			if min == nil || v.Extra+v.Fewer < min.Extra+min.Fewer {
				minKey, min = k, v
			}
		}
		delete(s.clients, minKey)
		c.Error = min.Extra + min.Fewer
		// Space-Saving: the newcomer inherits the replaced count.
		c.Extra, c.Fewer = min.Extra, min.Fewer
	}
	s.clients[client] = c
	return c
}

// Report is what GET /admin/candidate shows.
type Report struct {
	Source   string    `json:"source"`
	Since    time.Time `json:"since"`
	Requests int64     `json:"requests"`
	// AgreeAllowed and AgreeDenied count the requests both decided alike;
	// ExtraDenials those only the candidate would deny, FewerDenials
	// those only the live configuration denied.
	AgreeAllowed int64 `json:"agree_allowed"`
	AgreeDenied  int64 `json:"agree_denied"`
	ExtraDenials int64 `json:"extra_denials"`
	FewerDenials int64 `json:"fewer_denials"`
	// StoreErrors counts requests the candidate's store failed to decide.
	StoreErrors int64                `json:"store_errors"`
	Limits      map[string]LimitDiff `json:"limits"`
	TopClients  []ClientCount        `json:"top_clients"`
	// FirstDiverging are the first MaxSamples requests decided apart.
	FirstDiverging []Sample `json:"first_diverging"`
}

// Report returns the record so far.
func (s *Stats) Report(source string) Report {
	r := Report{Source: source, Since: s.started, Requests: s.requests.Load(),
		AgreeAllowed: s.agreeAllowed.Load(), AgreeDenied: s.agreeDenied.Load(),
		ExtraDenials: s.extra.Load(), FewerDenials: s.fewer.Load(), StoreErrors: s.storeErrors.Load(),
		Limits: make(map[string]LimitDiff)}
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, d := range s.limits {
		r.Limits[n] = *d
	}
	for _, c := range s.clients {
		r.TopClients = append(r.TopClients, *c)
	}
	slices.SortFunc(r.TopClients, func(a, b ClientCount) int {
		if d := (b.Extra + b.Fewer) - (a.Extra + a.Fewer); d != 0 {
			return int(min(max(d, -1), 1))
		}
		if a.Client < b.Client {
			return -1
		}
		return 1
	})
	if len(r.TopClients) > TopClients {
		r.TopClients = r.TopClients[:TopClients]
	}
	r.FirstDiverging = slices.Clone(s.samples)
	if r.TopClients == nil {
		r.TopClients = []ClientCount{}
	}
	if r.FirstDiverging == nil {
		r.FirstDiverging = []Sample{}
	}
	return r
}
