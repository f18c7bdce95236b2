package accesslog

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Bounds of a rate limit service call's line. A call carries at most 64
// descriptors of 32 entries (the service refuses more), each key and
// value as long as the caller likes; the line stays well under
// MaxLineBytes whatever it sends.
const (
	// MaxRLSKey is the longest key written as it is; a longer one is
	// written hashed.
	MaxRLSKey = 64
	// MaxRLSValue is the longest value written as it is; a longer one is
	// written hashed.
	MaxRLSValue = 128
	// MaxRLSNamed is the longest key or value written as it is when the
	// configuration names it (RLSEntry.Named, RLSEntry.Matched): the
	// operator's text, such as Envoy Gateway's route names used as keys
	// and values, which a replay must match again; longer is hashed.
	MaxRLSNamed = 512
	// MaxRLSDomain is the longest domain written as it is; a longer one
	// (no configuration names one: a caller's own) is written hashed
	// (kind "rls_domain"), so a call of a huge domain still makes a line
	// the parser reads, answered as any unknown domain is.
	MaxRLSDomain = 256
	// maxRLSText bounds the descriptors' text of one line; the
	// descriptors past it are left out and counted (RLSCall.Dropped).
	maxRLSText = 32 << 10
	// maxRLSFirst bounds the first descriptor's text, which always
	// stays: past it the descriptor is written again with keys and values
	// hashed past MaxRLSKey and MaxRLSValue (at most about 38 KiB).
	maxRLSFirst = MaxLineBytes - 8<<10
	// maxRLSDescriptors and maxRLSEntries bound what a parsed line may
	// hold: the service's own bounds.
	maxRLSDescriptors = 64
	maxRLSEntries     = 32
)

// RLSCall is a call of Envoy's rate limit service (ShouldRateLimit): an
// Entry with RLS set is one of those, not an HTTP request.
//
// Given to Writer.Log, an entry's value is the caller's; the writer
// writes it as it is when Matched (the configuration names the value: a
// key_value or a wildcard of one, as an HTTP line writes its path) or
// Options.RawClient, and otherwise hashed like a client identity: "~"
// then Hash(salt, "descriptor", value). A hash is stable, so a replay
// still counts every value apart, on a counter of its own; only a rule
// naming a value can no longer match it (a value a rule named was
// written as it is). A key or value longer than MaxRLSKey or
// MaxRLSValue is hashed too (kind "descriptor_key" for a key), so a line
// stays bounded, unless the configuration names it (RLSEntry.Named,
// RLSEntry.Matched): then up to MaxRLSNamed, so that a replay matches
// long rule keys and values (Envoy Gateway's route names) again.
type RLSCall struct {
	// Domain is the call's domain.
	Domain string
	// HitsAddend is the request's hits_addend as sent (0: one).
	HitsAddend uint32
	// Code is the overall code: "ok" or "over_limit".
	Code string
	// Descriptors are the request's descriptors, in order.
	Descriptors []RLSDescriptor
	// StoreLatency is the store's time deciding the call.
	StoreLatency time.Duration
	// Dropped counts the descriptors left out of the line to keep it
	// bounded (read back: those the line lacks).
	Dropped int
}

// RLSDescriptor is one descriptor of a call and its outcome.
type RLSDescriptor struct {
	// Entries are its keys and values.
	Entries []RLSEntry
	// HasAddend is set when the descriptor carried a hits_addend of its
	// own (Addend, 0 allowed: a check that counts nothing).
	HasAddend bool
	Addend    uint64
	// Code is its outcome: "ok", "over_limit", "shadow_over_limit",
	// "unlimited", "no_limit" or "store_error".
	Code string
}

// RLSEntry is one key and value of a descriptor.
type RLSEntry struct {
	Key, Value string
	// Matched, given to Writer.Log, says that the configuration matched
	// the value by value; it is not read back.
	Matched bool
	// Named, given to Writer.Log, says that the configuration names the
	// key (a rule applied to the descriptor), so the key is written as it
	// is up to MaxRLSNamed bytes, not MaxRLSKey; it is not read back.
	Named bool
}

// rlsCodes are the codes a line may carry.
var rlsCodes = map[string]string{"ok": "ok", "over_limit": "over_limit", "shadow_over_limit": "shadow_over_limit",
	"unlimited": "unlimited", "no_limit": "no_limit", "store_error": "store_error"}

// rlsValue returns the logged form of an entry's key or value.
func (lw *Writer) rlsValue(dst []byte, v string, raw bool, max int, kind string) []byte {
	if (raw || lw.opts.RawClient) && len(v) <= max {
		return append(dst, v...)
	}
	return appendHash(append(dst, '~'), lw.opts.Salt, kind, v)
}

// appendRLSDomain writes a call's domain, as a JSON string or a token:
// as it is up to MaxRLSDomain bytes, hashed past it.
func (lw *Writer) appendRLSDomain(b []byte, d string, jsonl bool) []byte {
	if len(d) > MaxRLSDomain {
		h := appendHash([]byte{'~'}, lw.opts.Salt, "rls_domain", d)
		if jsonl {
			return appendJSONString(b, h)
		}
		return appendToken(b, h)
	}
	if jsonl {
		return appendJSONString(b, d)
	}
	return appendToken(b, d)
}

// appendRLSDescriptors writes the combined format's rls= value:
// DESC;DESC;... with DESC = CODE[+ADDEND]:KEY=VALUE,KEY=VALUE, every key
// and value %-escaped (',', ';', '=' too). It returns the number of
// descriptors left out.
func (lw *Writer) appendRLSDescriptors(b []byte, c *RLSCall, jsonl bool) ([]byte, int) {
	start := len(b)
	var scratch []byte
	strict := false
	for i := 0; i < len(c.Descriptors); i++ {
		d := &c.Descriptors[i]
		mark := len(b)
		if jsonl {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"code":`...)
			b = appendJSONString(b, d.Code)
			if d.HasAddend {
				b = append(b, `,"hits_addend":`...)
				b = strconv.AppendUint(b, d.Addend, 10)
			}
			b = append(b, `,"entries":[`...)
		} else {
			if i > 0 {
				b = append(b, ';')
			}
			b = append(b, d.Code...)
			if d.HasAddend {
				b = append(b, '+')
				b = strconv.AppendUint(b, d.Addend, 10)
			}
			b = append(b, ':')
		}
		for j, e := range d.Entries {
			kmax, vmax := MaxRLSKey, MaxRLSValue
			if !strict && e.Named {
				kmax = MaxRLSNamed
			}
			if !strict && e.Matched {
				vmax = MaxRLSNamed
			}
			scratch = lw.rlsValue(scratch[:0], e.Key, true, kmax, "descriptor_key")
			if jsonl {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"key":`...)
				b = appendJSONString(b, scratch)
				scratch = lw.rlsValue(scratch[:0], e.Value, e.Matched, vmax, "descriptor")
				b = append(b, `,"value":`...)
				b = appendJSONString(b, scratch)
				b = append(b, '}')
				continue
			}
			if j > 0 {
				b = append(b, ',')
			}
			b = appendRLSToken(b, scratch)
			b = append(b, '=')
			scratch = lw.rlsValue(scratch[:0], e.Value, e.Matched, vmax, "descriptor")
			b = appendRLSToken(b, scratch)
		}
		if jsonl {
			b = append(b, "]}"...)
		}
		// The first descriptor always stays, so that the line says what
		// was asked (a line of none is malformed). Past maxRLSFirst it is
		// written again strictly: 32 entries of a key and a value of at
		// most MaxRLSKey and MaxRLSValue bytes, each escaped at most 6
		// bytes a byte (a JSON \u00XX), well under MaxLineBytes.
		if i == 0 && !strict && len(b)-start > maxRLSFirst {
			b, strict = b[:mark], true
			i--
			continue
		}
		strict = false
		if len(b)-start > maxRLSText && i > 0 {
			return b[:mark], len(c.Descriptors) - i
		}
	}
	return b, 0
}

// appendRLSToken writes v %-escaped as appendToken does, and ',', ';'
// and '=' too; an empty v writes nothing.
func appendRLSToken(b, v []byte) []byte {
	for _, c := range v {
		if c <= ' ' || c >= 0x7f || c == '%' || c == '"' || c == '\\' || c == ',' || c == ';' || c == '=' {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
}

// appendRLS writes the line of a rate limit service call. Combined:
//
//   - - - [TIME] "RLS DOMAIN gRPC" 200 - "-" "-" outcome=ok decision=allowed latency=S store_latency=S hits_addend=N rls=DESCRIPTORS
//
// with status 429 and outcome over_limit for OVER_LIMIT, outcome
// store_error when the store failed, and rls_dropped=N when descriptors
// were left out. JSONL: {"time":..., "method":"RLS", "status":200,
// "outcome":..., "decision":..., "rls":{"domain":..., "hits_addend":N,
// "store_latency":S, "descriptors":[{"code":..., "hits_addend":N,
// "entries":[{"key":..., "value":...}]}], "dropped":N}, "latency":S}.
func (lw *Writer) appendRLS(b []byte, e *Entry) []byte {
	c := e.RLS
	if lw.opts.Format == JSONL {
		b = append(b, `{"time":"`...)
		b = e.Time.AppendFormat(b, jsonTime)
		b = append(b, `","method":"RLS","status":`...)
		b = strconv.AppendInt(b, int64(e.Status), 10)
		b = appendField(b, "outcome", e.Outcome)
		b = appendField(b, "decision", e.Decision)
		b = append(b, `,"rls":{"domain":`...)
		b = lw.appendRLSDomain(b, c.Domain, true)
		b = append(b, `,"hits_addend":`...)
		b = strconv.AppendUint(b, uint64(c.HitsAddend), 10)
		b = append(b, `,"store_latency":`...)
		b = appendSeconds(b, c.StoreLatency)
		b = append(b, `,"descriptors":[`...)
		var dropped int
		b, dropped = lw.appendRLSDescriptors(b, c, true)
		b = append(b, ']')
		if dropped > 0 {
			b = append(b, `,"dropped":`...)
			b = strconv.AppendInt(b, int64(dropped), 10)
		}
		b = append(b, `},"latency":`...)
		b = appendSeconds(b, e.Latency)
		return append(b, "}\n"...)
	}
	b = append(b, "- - - ["...)
	b = e.Time.AppendFormat(b, combinedTime)
	b = append(b, "] \"RLS "...)
	b = lw.appendRLSDomain(b, c.Domain, false)
	b = append(b, " gRPC\" "...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, ` - "-" "-" outcome=`...)
	b = appendToken(b, e.Outcome)
	b = append(b, " decision="...)
	b = appendToken(b, e.Decision)
	b = append(b, " latency="...)
	b = appendSeconds(b, e.Latency)
	b = append(b, " store_latency="...)
	b = appendSeconds(b, c.StoreLatency)
	b = append(b, " hits_addend="...)
	b = strconv.AppendUint(b, uint64(c.HitsAddend), 10)
	b = append(b, " rls="...)
	var dropped int
	b, dropped = lw.appendRLSDescriptors(b, c, false)
	if dropped > 0 {
		b = append(b, " rls_dropped="...)
		b = strconv.AppendInt(b, int64(dropped), 10)
	}
	return append(b, '\n')
}

// parseRLSDescriptors reads the combined format's rls= value.
func (p *Parser) parseRLSDescriptors(v []byte) ([]RLSDescriptor, error) {
	var out []RLSDescriptor
	for len(v) > 0 {
		var one []byte
		one, v, _ = cut(v, ';')
		if len(out) == maxRLSDescriptors {
			return nil, fmt.Errorf("more than %d descriptors", maxRLSDescriptors)
		}
		head, entries, ok := cut(one, ':')
		if !ok {
			return nil, errors.New("a descriptor without its code")
		}
		var d RLSDescriptor
		code, addend, has := cut(head, '+')
		var err error
		if d.Code, err = p.rlsCode(string(code)); err != nil {
			return nil, err
		}
		if has {
			if d.Addend, err = strconv.ParseUint(string(addend), 10, 64); err != nil {
				return nil, fmt.Errorf("hits_addend %q", addend)
			}
			d.HasAddend = true
		}
		for len(entries) > 0 {
			var kv []byte
			kv, entries, _ = cut(entries, ',')
			if len(d.Entries) == maxRLSEntries {
				return nil, fmt.Errorf("a descriptor of more than %d entries", maxRLSEntries)
			}
			k, val, ok := cut(kv, '=')
			if !ok {
				return nil, fmt.Errorf("entry %q is not key=value", kv)
			}
			ks, err := p.unescape(k, true)
			if err != nil {
				return nil, err
			}
			vs, err := p.unescape(val, false)
			if err != nil {
				return nil, err
			}
			d.Entries = append(d.Entries, RLSEntry{Key: ks, Value: vs})
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("no descriptor")
	}
	return out, nil
}

// unescape decodes %XX escapes (no "-" convention: empty is empty).
func (p *Parser) unescape(b []byte, interned bool) (string, error) {
	if len(b) == 1 && b[0] == '-' {
		return "-", nil
	}
	if bytes.IndexByte(b, '%') < 0 && !interned {
		return string(b), nil
	}
	return p.token(b, interned)
}

func (p *Parser) rlsCode(s string) (string, error) {
	if c, ok := rlsCodes[s]; ok {
		return c, nil
	}
	return "", fmt.Errorf("unknown descriptor code %q", s)
}

// jsonRLS is the jsonl line's rls object.
type jsonRLS struct {
	Domain       string   `json:"domain"`
	HitsAddend   uint32   `json:"hits_addend"`
	StoreLatency *float64 `json:"store_latency"`
	Descriptors  []struct {
		Code       string  `json:"code"`
		HitsAddend *uint64 `json:"hits_addend"`
		Entries    []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"entries"`
	} `json:"descriptors"`
	Dropped int `json:"dropped"`
}

// fromJSONRLS fills p.e.RLS from the decoded rls object.
func (p *Parser) fromJSONRLS(j *jsonRLS) error {
	c := &RLSCall{Domain: j.Domain, HitsAddend: j.HitsAddend, Dropped: j.Dropped}
	if len(j.Descriptors) > maxRLSDescriptors {
		return fmt.Errorf("more than %d descriptors", maxRLSDescriptors)
	}
	if j.StoreLatency != nil {
		var err error
		if c.StoreLatency, err = seconds(strconv.AppendFloat(nil, *j.StoreLatency, 'f', -1, 64)); err != nil {
			return fmt.Errorf("store_latency: %w", err)
		}
	}
	for _, jd := range j.Descriptors {
		if len(jd.Entries) > maxRLSEntries {
			return fmt.Errorf("a descriptor of more than %d entries", maxRLSEntries)
		}
		code, err := p.rlsCode(jd.Code)
		if err != nil {
			return err
		}
		d := RLSDescriptor{Code: code}
		if jd.HitsAddend != nil {
			d.HasAddend, d.Addend = true, *jd.HitsAddend
		}
		for _, e := range jd.Entries {
			d.Entries = append(d.Entries, RLSEntry{Key: p.strS(e.Key), Value: e.Value})
		}
		c.Descriptors = append(c.Descriptors, d)
	}
	p.e.RLS = c
	return p.checkRLS()
}

// checkRLS checks a parsed call line.
func (p *Parser) checkRLS() error {
	c := p.e.RLS
	switch {
	case c.Domain == "":
		return errors.New("rls: empty domain")
	case len(c.Descriptors) == 0:
		return errors.New("rls: no descriptor")
	case c.Dropped < 0 || c.Dropped > maxRLSDescriptors:
		return fmt.Errorf("rls: dropped %d out of range", c.Dropped)
	}
	switch p.e.Outcome {
	case "ok", "over_limit", "store_error":
	default:
		return fmt.Errorf("rls: unknown outcome %q", p.e.Outcome)
	}
	switch p.e.Decision {
	case "allowed":
		c.Code = "ok"
	case "denied":
		c.Code = "over_limit"
	default:
		return fmt.Errorf("rls: unknown decision %q", p.e.Decision)
	}
	return nil
}
