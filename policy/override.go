package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/ratelimit"
)

// Bounds of the override table and of one override, so that the admin API
// cannot be made to store, or every gateway to read, without bound.
const (
	// MaxOverrides is the most overrides the table holds.
	MaxOverrides = 10000
	// MaxOverrideRates is the most rates one override may give.
	MaxOverrideRates = 16
	// MaxOverrideTTL is the furthest an override's expiry may lie ahead:
	// a permanent deal belongs in the configuration.
	MaxOverrideTTL = 366 * 24 * time.Hour
	// MaxReasonLen is the longest reason, in bytes.
	MaxReasonLen = 1024
)

// OverrideNumbers are an override's numbers as the operator writes them,
// in the syntax of a [[limits]] entry.
type OverrideNumbers struct {
	// Rates replace the limit's rates ("1000/s").
	Rates []string
	// Burst replaces a token_bucket's or gcra's burst (0: the rate's limit).
	Burst int64
	// MaxInFlight replaces a concurrency limit's max_in_flight.
	MaxInFlight int64
}

// FieldError is a problem with one field of an override, named as in its
// JSON body ("rates[1]").
type FieldError struct {
	// Field names the field, e.g. "rates[1]".
	Field string `json:"field"`
	// Message says what is wrong with it.
	Message string `json:"message"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// OverrideLimit checks n against l and returns the limit l becomes under
// it: l's definition with n's numbers (the same ID, and so the same
// counters, when the windows keep their lengths). Every problem is
// returned, each naming its field.
func (l *Limit) OverrideLimit(n OverrideNumbers) (*ratelimit.Limit, []FieldError) {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{field, fmt.Sprintf(format, args...)})
	}
	var rates []ratelimit.Rate
	if l.Algorithm == ratelimit.Concurrency {
		if len(n.Rates) > 0 {
			add("rates", "limit %q is a concurrency limit: give max_in_flight", l.Name)
		}
		if n.MaxInFlight < 1 || n.MaxInFlight > ratelimit.MaxLimit {
			add("max_in_flight", "must be in 1..2^53, got %d", n.MaxInFlight)
		}
	} else {
		if n.MaxInFlight != 0 {
			add("max_in_flight", "applies only to a concurrency limit; %q is %s", l.Name, l.Algorithm)
		}
		switch {
		case len(n.Rates) == 0:
			add("rates", "at least one rate is required")
		case len(n.Rates) > MaxOverrideRates:
			add("rates", "at most %d rates, got %d", MaxOverrideRates, len(n.Rates))
		}
		for i, s := range n.Rates {
			if i >= MaxOverrideRates {
				break
			}
			r, err := ratelimit.ParseRate(s)
			if err != nil {
				add(fmt.Sprintf("rates[%d]", i), "%v", err)
				continue
			}
			for _, prev := range rates {
				if prev.Window == r.Window {
					add(fmt.Sprintf("rates[%d]", i), "window %s appears twice", r.Window)
				}
			}
			rates = append(rates, r)
		}
	}
	if n.Burst != 0 {
		switch {
		case l.Algorithm != ratelimit.TokenBucket && l.Algorithm != ratelimit.GCRA:
			add("burst", "applies only to token_bucket and gcra; %q is %s", l.Name, l.Algorithm)
		case n.Burst < 0 || n.Burst > ratelimit.MaxLimit:
			add("burst", "must be in 1..2^53, got %d", n.Burst)
		case len(n.Rates) != 1:
			add("burst", "requires exactly one rate")
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	v, err := l.WithNumbers(rates, n.Burst, n.MaxInFlight)
	if err != nil {
		field := "rates"
		if l.Algorithm == ratelimit.Concurrency {
			field = "max_in_flight"
		}
		return nil, []FieldError{{field, err.Error()}}
	}
	if msg := l.checkRedisLog(v); msg != "" {
		return nil, []FieldError{{"rates", msg}}
	}
	// As for the limit itself: a capacity below the static cost would deny
	// every request.
	for i := range v.Windows() {
		if c := v.Capacity(i); l.Cost > c {
			at := i
			if i < len(v.Rates) {
				// v's windows are sorted (Finish), not as listed: name the
				// rate where the override lists it.
				at = slices.IndexFunc(rates, func(r ratelimit.Rate) bool { return r.Window == v.Rates[i].Window })
			}
			field := fmt.Sprintf("rates[%d]", at)
			if n.Burst != 0 {
				field = "burst"
			} else if l.Algorithm == ratelimit.Concurrency {
				field = "max_in_flight"
			}
			errs = append(errs, FieldError{field, fmt.Sprintf("capacity %d is below the limit's cost %d, so every request would be denied", c, l.Cost)})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return v, nil
}

// identityPart reports whether a key part names the client: what an
// override's subject is made of.
func identityPart(k keys.PartKind) bool {
	switch k {
	case keys.PartClient, keys.PartIP, keys.PartAPIKey, keys.PartUser, keys.PartMTLS, keys.PartConsumer:
		return true
	}
	return false
}

// AppendIdentityParts appends the identity parts of parts (client, ip,
// api_key, user, mtls, consumer) to dst: what an override's subject is
// made of, here and when package override finds one for a request.
func AppendIdentityParts(dst, parts []keys.Part) []keys.Part {
	for _, p := range parts {
		if identityPart(p.Kind) {
			dst = append(dst, p)
		}
	}
	return dst
}

// OverrideSubject returns the subject under which an override of l for the
// client id is stored and found: "key:" and the counter key of l's
// identity parts (client, ip, api_key, user, mtls, consumer) for id. For a limit keyed by
// nothing else that is the client's counter key itself; a limit that also
// counts per route, method or header is overridden on every counter of the
// client. The error says why l has no counter for id: it is not keyed by
// a client, or it answers 401 to such a client.
func (p *Policy) OverrideSubject(l *Limit, id *keys.Identity) (string, error) {
	parts := AppendIdentityParts(nil, l.By)
	if len(parts) == 0 {
		return "", fmt.Errorf("limit %q is not keyed by a client (by = %s); change its rates in the configuration", l.Name, partsText(l.By))
	}
	if keys.Missing(parts, id, nil) {
		switch l.OnMissing {
		case OnMissingReject:
			return "", fmt.Errorf("limit %q answers 401 to requests without %s and counts them nowhere; name the client by those", l.Name, keys.MissingNames(parts))
		case OnMissingIP:
			parts = AppendIdentityParts(nil, l.ByIP)
		}
	}
	return "key:" + string(p.Identity.AppendKey(nil, parts, id, &keys.Values{})), nil
}

func partsText(ps []keys.Part) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprintf("%q", p.String())
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// ConsumerSubject is the subject of an override for the consumer named
// name.
func ConsumerSubject(name string) string { return "consumer:" + name }
