package accesslog

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// fastJSON decodes the flat objects Writer writes — string and number
// values, no escapes needing more than a copy — into p.js without
// reflection. It returns false for anything else, and the caller then
// decodes the line with encoding/json, which also reports the error.
func (p *Parser) fastJSON(b []byte) bool {
	j := &p.js
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipWS(b, i+1) == len(b)
	}
	for {
		k, n, ok := plainString(b, i)
		if !ok {
			return false
		}
		i = skipWS(b, n)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return false
		}
		if b[i] == '"' {
			v, n, ok := plainString(b, i)
			if !ok {
				// Escapes: let encoding/json decode this one string.
				if v, n, ok = escapedString(b, i); !ok {
					return false
				}
			}
			i = n
			var dst *string
			switch string(k) {
			case "time":
				dst = &j.Time
			case "client":
				dst = &j.Client
			case "kind":
				dst = &j.Kind
			case "key":
				dst = &j.Key
			case "ip":
				dst = &j.IP
			case "method":
				dst = &j.Method
			case "path":
				dst = &j.Path
			case "proto":
				dst = &j.Proto
			case "referer":
				dst = &j.Referer
			case "user_agent":
				dst = &j.UserAgent
			case "route":
				dst = &j.Route
			case "outcome":
				dst = &j.Outcome
			case "decision":
				dst = &j.Decision
			case "limit":
				dst = &j.Limit
			case "consumer":
				dst = &j.Consumer
			case "plan":
				dst = &j.Plan
			case "request_id":
				dst = &j.RequestID
			default:
				return false
			}
			if dst == &j.Time || dst == &j.RequestID {
				// Unique per line: not interned.
				*dst = string(v)
			} else {
				*dst = p.str(v)
			}
		} else {
			n := i
			for n < len(b) && (b[n] == '.' || b[n] == '-' || b[n] == '+' || b[n] == 'e' || b[n] == 'E' || ('0' <= b[n] && b[n] <= '9')) {
				n++
			}
			num := b[i:n]
			i = n
			switch string(k) {
			case "status":
				v, err := atoi(num)
				if err != nil {
					return false
				}
				j.Status = v
			case "bytes":
				v, err := atoi(num)
				if err != nil {
					return false
				}
				n := int64(v)
				j.Bytes = &n
			case "latency":
				f, err := strconv.ParseFloat(string(num), 64)
				if err != nil {
					return false
				}
				j.Latency = &f
			default:
				return false
			}
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return skipWS(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// plainString reads a JSON string at b[i] that has no escapes and only
// printable ASCII or valid UTF-8; it returns its contents and the index
// after the closing quote.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for n := i + 1; n < len(b); n++ {
		switch c := b[n]; {
		case c == '"':
			v := b[i+1 : n]
			if !utf8.Valid(v) {
				return nil, 0, false
			}
			return v, n + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// escapedString decodes the JSON string at b[i] with encoding/json.
func escapedString(b []byte, i int) ([]byte, int, bool) {
	for n := i + 1; n < len(b); n++ {
		switch b[n] {
		case '\\':
			n++
		case '"':
			var s string
			if json.Unmarshal(b[i:n+1], &s) != nil {
				return nil, 0, false
			}
			return []byte(s), n + 1, true
		}
	}
	return nil, 0, false
}
