package accesslog

import (
	"bufio"
	"bytes"
	"io"
	"time"
)

// LongestLatency reads r to its end and returns the longest latency its
// lines carry, in format f (Auto tells them apart per line). It is the
// first pass of a replay that puts lines in time order, so it decodes only
// the latency field, without allocating per line: lines a Parser would
// reject may still count, which only widens the result. Lines longer than
// MaxLineBytes are skipped, as the Parser skips them.
func LongestLatency(r io.Reader, f Format) (time.Duration, error) {
	br := bufio.NewReaderSize(r, MaxLineBytes)
	var longest time.Duration
	for {
		line, err := br.ReadSlice('\n')
		for err == bufio.ErrBufferFull {
			line = nil
			_, err = br.ReadSlice('\n')
		}
		if len(line) > 0 {
			if d, ok := lineLatency(bytes.TrimRight(line, "\r\n"), f); ok {
				longest = max(longest, d)
			}
		}
		if err == io.EOF {
			return longest, nil
		}
		if err != nil {
			return longest, err
		}
	}
}

// lineLatency returns the latency field of one line.
func lineLatency(line []byte, f Format) (time.Duration, bool) {
	if len(line) == 0 {
		return 0, false
	}
	if f == JSONL || f == Auto && line[0] == '{' {
		return jsonLatency(line)
	}
	return combinedLatency(line)
}

// combinedLatency walks a combined line as parseCombined does, to the
// latency= field after the quoted fields.
func combinedLatency(line []byte) (time.Duration, bool) {
	_, rest, ok := cut(line, ' ')
	if !ok {
		return 0, false
	}
	i := bytes.IndexByte(rest, '[')
	if i < 0 {
		return 0, false
	}
	if _, rest, ok = cut(rest[i+1:], ']'); !ok {
		return 0, false
	}
	_, rest, err := quoted(rest)
	if err != nil {
		return 0, false
	}
	_, rest, _ = cut(bytes.TrimLeft(rest, " "), ' ') // status
	_, rest, _ = cut(bytes.TrimLeft(rest, " "), ' ') // bytes
	if r := bytes.TrimLeft(rest, " "); len(r) > 0 && r[0] == '"' {
		if _, r, err = quoted(r); err != nil {
			return 0, false
		}
		if _, r, err = quoted(r); err != nil {
			return 0, false
		}
		rest = r
	}
	for len(rest) > 0 {
		var kv []byte
		kv, rest, _ = cut(bytes.TrimLeft(rest, " "), ' ')
		if k, v, ok := cut(kv, '='); ok && string(k) == "latency" {
			d, err := seconds(v)
			return d, err == nil
		}
	}
	return 0, false
}

// jsonLatency finds the "latency" member of a jsonl line: the key outside
// any string, followed by a colon, then a number.
func jsonLatency(line []byte) (time.Duration, bool) {
	const key = `"latency"`
	in := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if in {
			switch c {
			case '\\':
				i++
			case '"':
				in = false
			}
			continue
		}
		if c != '"' {
			continue
		}
		if bytes.HasPrefix(line[i:], []byte(key)) {
			if j := skipWS(line, i+len(key)); j < len(line) && line[j] == ':' {
				j = skipWS(line, j+1)
				n := j
				for n < len(line) && (line[n] == '.' || line[n] == '-' || line[n] == '+' || line[n] == 'e' || line[n] == 'E' || ('0' <= line[n] && line[n] <= '9')) {
					n++
				}
				d, err := seconds(line[j:n])
				return d, err == nil
			}
		}
		in = true
	}
	return 0, false
}
