package accesslog

import (
	"bytes"
	"errors"
	"fmt"
)

// units parses a combined line's units=L:N,L:N.
func (p *Parser) units(v []byte) ([]Units, error) {
	if len(v) == 1 && v[0] == '-' {
		return nil, nil
	}
	var out []Units
	for len(v) > 0 {
		item, rest, more := bytes.Cut(v, []byte{','})
		if more && len(rest) == 0 {
			return nil, errors.New("a trailing comma")
		}
		v = rest
		name, n, ok := bytes.Cut(item, []byte{':'})
		if !ok || len(name) == 0 {
			return nil, fmt.Errorf("%q is not limit:units", item)
		}
		if len(out) == maxUnitsPerLine {
			return nil, fmt.Errorf("more than %d limits", maxUnitsPerLine)
		}
		l, err := p.token(name, true)
		if err != nil {
			return nil, err
		}
		u, err := parseUnits(n)
		if err != nil {
			return nil, fmt.Errorf("units of %q: %w", l, err)
		}
		out = append(out, Units{Limit: l, N: u})
	}
	return out, nil
}

// parseUnits parses an integer in 0..2^53 written in decimal digits.
func parseUnits(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 16 {
		return 0, errors.New("not an integer in 0..2^53")
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errors.New("not an integer in 0..2^53")
		}
		v = v*10 + int64(c-'0')
	}
	if v > maxUnits {
		return 0, errors.New("not an integer in 0..2^53")
	}
	return v, nil
}
