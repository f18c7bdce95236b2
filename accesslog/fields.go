package accesslog

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Decoding of the values inside a line, shared by both formats.

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
