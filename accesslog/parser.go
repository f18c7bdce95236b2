package accesslog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// MaxLineBytes is the longest line Parser reads; longer lines are reported
// as malformed and skipped.
const MaxLineBytes = 64 << 10

// MaxReported is how many malformed lines Parser keeps for Malformed; it
// counts all of them.
const MaxReported = 100

// maxInterned bounds the parser's table of repeated short values.
const maxInterned = 4096

// LineError is one malformed line.
type LineError struct {
	// Line is the 1-based line number.
	Line int
	// Err says what is wrong with it.
	Err error
}

// Error implements error.
func (e LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Parser reads access log lines one at a time, like bufio.Scanner:
//
//	p := accesslog.NewParser(r, accesslog.Auto)
//	for p.Next() {
//		e := p.Entry()
//		...
//	}
//	if err := p.Err(); err != nil { ... }          // reading failed
//	for _, le := range p.Malformed() { ... }       // lines skipped
//
// A malformed line is recorded with its line number and skipped; parsing
// goes on. Blank lines are skipped silently. A Parser is not safe for
// concurrent use.
type Parser struct {
	// OnMalformed, when set, is called for every malformed line as it is
	// skipped (including those past MaxReported).
	OnMalformed func(LineError)

	r         *bufio.Reader
	format    Format
	line      int
	e         Entry
	err       error
	malformed []LineError
	nBad      int
	intern    map[string]string
	js        jsonEntry
}

// NewParser returns a Parser of r in format f (Auto detects it per line).
func NewParser(r io.Reader, f Format) *Parser {
	return &Parser{r: bufio.NewReaderSize(r, MaxLineBytes), format: f, intern: make(map[string]string)}
}

// Next reads the next well-formed entry. It returns false at the end of the
// input or on a read error (see Err).
func (p *Parser) Next() bool {
	for p.err == nil {
		line, err := p.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			p.line++
			p.bad(errors.New("line too long"))
			for err == bufio.ErrBufferFull {
				_, err = p.r.ReadSlice('\n')
			}
			if err != nil && err != io.EOF {
				p.err = err
			}
			if err == io.EOF {
				return false
			}
			continue
		}
		if err != nil && err != io.EOF {
			p.err = err
			return false
		}
		if len(line) == 0 && err == io.EOF {
			return false
		}
		p.line++
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) != 0 {
			if perr := p.parse(line); perr != nil {
				p.bad(perr)
			} else {
				return true
			}
		}
		if err == io.EOF {
			return false
		}
	}
	return false
}

func (p *Parser) bad(err error) {
	le := LineError{Line: p.line, Err: err}
	p.nBad++
	if len(p.malformed) < MaxReported {
		p.malformed = append(p.malformed, le)
	}
	if p.OnMalformed != nil {
		p.OnMalformed(le)
	}
}

// Entry returns the entry read by the last successful Next. It is
// overwritten by the next call; copy it to keep it.
func (p *Parser) Entry() *Entry { return &p.e }

// Line returns the line number of the last line read.
func (p *Parser) Line() int { return p.line }

// Err returns the read error that stopped the parser, nil at a clean end.
func (p *Parser) Err() error { return p.err }

// Malformed returns the first MaxReported malformed lines.
func (p *Parser) Malformed() []LineError { return p.malformed }

// MalformedCount returns the number of malformed lines so far.
func (p *Parser) MalformedCount() int { return p.nBad }

func (p *Parser) parse(line []byte) error {
	f := p.format
	if f == Auto {
		f = Combined
		if line[0] == '{' {
			f = JSONL
		}
	}
	p.e = Entry{Bytes: -1}
	var err error
	if f == JSONL {
		err = p.parseJSON(line)
	} else {
		err = p.parseCombined(line)
	}
	if err != nil {
		return err
	}
	return p.check()
}

func (p *Parser) check() error {
	e := &p.e
	switch {
	case e.Method == "":
		return errors.New("missing method")
	case e.Status < 100 || e.Status > 999:
		return fmt.Errorf("status %d out of range", e.Status)
	case e.Time.IsZero():
		return errors.New("missing time")
	}
	return nil
}

// str returns b as a string, sharing one copy of short repeated values
// (routes, methods, kinds, outcomes, limit names).
func (p *Parser) str(b []byte) string {
	if s, ok := p.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(s) <= 64 && len(p.intern) < maxInterned {
		p.intern[s] = s
	}
	return s
}

// strS is str for a string already decoded.
func (p *Parser) strS(s string) string {
	if v, ok := p.intern[s]; ok {
		return v
	}
	if len(s) <= 64 && len(p.intern) < maxInterned {
		p.intern[s] = s
	}
	return s
}

// token reads an escaped token: "-" is empty, %XX are decoded.
func (p *Parser) token(b []byte, interned bool) (string, error) {
	if len(b) == 1 && b[0] == '-' {
		return "", nil
	}
	i := bytes.IndexByte(b, '%')
	if i < 0 {
		if interned {
			return p.str(b), nil
		}
		return string(b), nil
	}
	out := make([]byte, 0, len(b))
	for ; i >= 0; i = bytes.IndexByte(b, '%') {
		out = append(out, b[:i]...)
		if i+2 >= len(b) {
			return "", errors.New("truncated %-escape")
		}
		hi, lo := unhex(b[i+1]), unhex(b[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("bad %%-escape %q", b[i:i+3])
		}
		out = append(out, byte(hi<<4|lo))
		b = b[i+3:]
	}
	out = append(out, b...)
	if interned {
		return p.str(out), nil
	}
	return string(out), nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// cut splits b at the first sep.
func cut(b []byte, sep byte) (before, after []byte, ok bool) {
	if i := bytes.IndexByte(b, sep); i >= 0 {
		return b[:i], b[i+1:], true
	}
	return b, nil, false
}

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
		if err := p.field(k, v); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

func (p *Parser) field(k, v []byte) error {
	e := &p.e
	var err error
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
	case "key":
		e.APIKey, err = p.token(v, false)
	case "ip":
		e.IP, err = p.token(v, false)
	case "latency":
		e.Latency, err = seconds(v)
	}
	return err
}

// seconds parses a non-negative number of seconds, rounded to the
// microsecond.
func seconds(b []byte) (time.Duration, error) {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || f < 0 || math.IsNaN(f) || f > float64(math.MaxInt64/int64(time.Second)) {
		return 0, fmt.Errorf("bad seconds %q", b)
	}
	return time.Duration(math.Round(f*1e6)) * time.Microsecond, nil
}

// atoi parses a small non-negative decimal integer.
func atoi(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 18 {
		return 0, errors.New("not a number")
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errors.New("not a number")
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// jsonEntry is the jsonl line as encoding/json decodes it.
type jsonEntry struct {
	Time      string   `json:"time"`
	Client    string   `json:"client"`
	Kind      string   `json:"kind"`
	Key       string   `json:"key"`
	IP        string   `json:"ip"`
	Method    string   `json:"method"`
	Path      string   `json:"path"`
	Proto     string   `json:"proto"`
	Status    int      `json:"status"`
	Bytes     *int64   `json:"bytes"`
	Referer   string   `json:"referer"`
	UserAgent string   `json:"user_agent"`
	Route     string   `json:"route"`
	Outcome   string   `json:"outcome"`
	Decision  string   `json:"decision"`
	Limit     string   `json:"limit"`
	Latency   *float64 `json:"latency"`
}

func (p *Parser) parseJSON(line []byte) error {
	p.js = jsonEntry{}
	if !p.fastJSON(line) {
		p.js = jsonEntry{}
		if err := json.Unmarshal(line, &p.js); err != nil {
			return err
		}
	}
	j, e := &p.js, &p.e
	t, err := time.Parse(time.RFC3339Nano, j.Time)
	if err != nil {
		return fmt.Errorf("time %q: %w", j.Time, err)
	}
	*e = Entry{Time: t, Client: j.Client, ClientKind: p.strS(j.Kind), APIKey: j.Key, IP: j.IP,
		Method: p.strS(j.Method), Path: j.Path, Proto: p.strS(j.Proto), Status: j.Status, Bytes: -1,
		Referer: j.Referer, UserAgent: j.UserAgent, Route: p.strS(j.Route), Outcome: p.strS(j.Outcome),
		Decision: p.strS(j.Decision), Limit: p.strS(j.Limit)}
	if j.Bytes != nil {
		if *j.Bytes < 0 {
			return fmt.Errorf("bytes %d is negative", *j.Bytes)
		}
		e.Bytes = *j.Bytes
	}
	if j.Latency != nil {
		if e.Latency, err = seconds(strconv.AppendFloat(nil, *j.Latency, 'f', -1, 64)); err != nil {
			return fmt.Errorf("latency: %w", err)
		}
	}
	return nil
}

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
			default:
				return false
			}
			if dst == &j.Time {
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
