package accesslog

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// quoted reads a "..." field at the start of b (after spaces); a backslash
// escapes the next byte, as nginx writes \" inside quoted fields.
func quoted(b []byte) (field, rest []byte, err error) {
	b = bytes.TrimLeft(b, " ")
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, errors.New("want a quoted field")
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return b[1:i], b[i+1:], nil
		}
	}
	return nil, nil, errors.New("unterminated quoted field")
}

func (p *Parser) parseCombined(line []byte) error {
	e := &p.e
	client, rest, ok := cut(line, ' ')
	if !ok {
		return errors.New("want CLIENT IDENT USER [TIME] \"REQUEST\" STATUS BYTES")
	}
	var err error
	if e.Client, err = p.token(client, false); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	// ident and authuser: ignored.
	i := bytes.IndexByte(rest, '[')
	if i < 0 {
		return errors.New("missing [time]")
	}
	ts, rest, ok := cut(rest[i+1:], ']')
	if !ok {
		return errors.New("unterminated [time]")
	}
	if e.Time, err = time.Parse("02/Jan/2006:15:04:05 -0700", string(ts)); err != nil {
		return fmt.Errorf("time %q: %w", ts, err)
	}
	req, rest, err := quoted(rest)
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	method, req, _ := cut(req, ' ')
	path, proto, _ := cut(req, ' ')
	if e.Method, err = p.token(method, true); err != nil {
		return fmt.Errorf("method: %w", err)
	}
	if e.Path, err = p.token(path, false); err != nil {
		return fmt.Errorf("path: %w", err)
	}
	if e.Proto, err = p.token(proto, true); err != nil {
		return fmt.Errorf("proto: %w", err)
	}
	rest = bytes.TrimLeft(rest, " ")
	status, rest, _ := cut(rest, ' ')
	if e.Status, err = atoi(status); err != nil {
		return fmt.Errorf("status %q: %w", status, err)
	}
	rest = bytes.TrimLeft(rest, " ")
	size, rest, _ := cut(rest, ' ')
	if !(len(size) == 1 && size[0] == '-') {
		n, err := atoi(size)
		if err != nil {
			return fmt.Errorf("bytes %q: %w", size, err)
		}
		e.Bytes = int64(n)
	}
	if r := bytes.TrimLeft(rest, " "); len(r) > 0 && r[0] == '"' {
		ref, r, err := quoted(r)
		if err != nil {
			return fmt.Errorf("referer: %w", err)
		}
		ua, r, err := quoted(r)
		if err != nil {
			return fmt.Errorf("user agent: %w", err)
		}
		if e.Referer, err = p.token(ref, false); err != nil {
			return fmt.Errorf("referer: %w", err)
		}
		if e.UserAgent, err = p.token(ua, false); err != nil {
			return fmt.Errorf("user agent: %w", err)
		}
		rest = r
	}
	identified := false
	for len(rest) > 0 {
		var kv []byte
		rest = bytes.TrimLeft(rest, " ")
		kv, rest, _ = cut(rest, ' ')
		if len(kv) == 0 {
			continue
		}
		k, v, ok := cut(kv, '=')
		if !ok {
			return fmt.Errorf("field %q is not key=value", kv)
		}
		id, err := p.field(k, v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		identified = identified || id
	}
	if e.RLS != nil {
		// A rate limit service call: the request line is "RLS DOMAIN
		// gRPC".
		if e.Method != "RLS" {
			return errors.New("rls= on a line that is not an RLS call")
		}
		e.RLS.Domain = e.Path
		return p.checkRLS()
	}
	if !identified {
		return p.plain(path)
	}
	return nil
}

// plain reads a line that carries none of Tollgate's identity fields as
// nginx and Apache write their combined format: the first field is the
// client address ($remote_addr, %h), and the request target (target, as
// logged) may carry a query, which Entry.Path excludes.
func (p *Parser) plain(target []byte) error {
	e := &p.e
	e.IP = e.Client
	if path, _, ok := cut(target, '?'); ok {
		var err error
		if e.Path, err = p.token(path, false); err != nil {
			return fmt.Errorf("path: %w", err)
		}
	}
	return nil
}

// field stores the Tollgate field k=v of a combined line; identity reports
// whether k is one of the identity fields (kind, key, ip).
func (p *Parser) field(k, v []byte) (identity bool, err error) {
	e := &p.e
	switch string(k) {
	case "route":
		e.Route, err = p.token(v, true)
	case "outcome":
		e.Outcome, err = p.token(v, true)
	case "decision":
		e.Decision, err = p.token(v, true)
	case "limit":
		e.Limit, err = p.token(v, true)
	case "kind":
		e.ClientKind, err = p.token(v, true)
		identity = true
	case "key":
		e.APIKey, err = p.token(v, false)
		identity = true
	case "ip":
		e.IP, err = p.token(v, false)
		identity = true
	case "latency":
		e.Latency, err = seconds(v)
	case "consumer":
		e.Consumer, err = p.token(v, true)
	case "plan":
		e.Plan, err = p.token(v, true)
	case "request_id":
		// Unique per line: not interned.
		e.RequestID, err = p.token(v, false)
	case "rls":
		if e.RLS == nil {
			e.RLS = new(RLSCall)
		}
		e.RLS.Descriptors, err = p.parseRLSDescriptors(v)
		identity = true
	case "store_latency", "hits_addend", "rls_dropped":
		if e.RLS == nil {
			e.RLS = new(RLSCall)
		}
		switch string(k) {
		case "store_latency":
			e.RLS.StoreLatency, err = seconds(v)
		case "hits_addend":
			var n uint64
			n, err = strconv.ParseUint(string(v), 10, 32)
			e.RLS.HitsAddend = uint32(n)
		default:
			e.RLS.Dropped, err = atoi(v)
		}
	case "units":
		e.Units, err = p.units(v)
	}
	return identity, err
}
