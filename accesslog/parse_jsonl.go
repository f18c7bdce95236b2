package accesslog

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// jsonEntry is the jsonl line as encoding/json decodes it.
type jsonEntry struct {
	Time      string                     `json:"time"`
	Client    string                     `json:"client"`
	Kind      string                     `json:"kind"`
	Key       string                     `json:"key"`
	IP        string                     `json:"ip"`
	Method    string                     `json:"method"`
	Path      string                     `json:"path"`
	Proto     string                     `json:"proto"`
	Status    int                        `json:"status"`
	Bytes     *int64                     `json:"bytes"`
	Referer   string                     `json:"referer"`
	UserAgent string                     `json:"user_agent"`
	Route     string                     `json:"route"`
	Outcome   string                     `json:"outcome"`
	Decision  string                     `json:"decision"`
	Limit     string                     `json:"limit"`
	Consumer  string                     `json:"consumer"`
	Plan      string                     `json:"plan"`
	RequestID string                     `json:"request_id"`
	Units     map[string]json.RawMessage `json:"units"`
	Latency   *float64                   `json:"latency"`
	RLS       *jsonRLS                   `json:"rls"`
}

func (p *Parser) parseJSON(line []byte) error {
	p.js = jsonEntry{}
	if !p.fastJSON(line) {
		p.js = jsonEntry{}
		if err := json.Unmarshal(line, &p.js); err != nil {
			return err
		}
	}
	return p.fromJSON()
}

// fromJSON fills p.e from the decoded p.js.
func (p *Parser) fromJSON() error {
	j, e := &p.js, &p.e
	t, err := time.Parse(time.RFC3339Nano, j.Time)
	if err != nil {
		return fmt.Errorf("time %q: %w", j.Time, err)
	}
	*e = Entry{Time: t, Client: j.Client, ClientKind: p.strS(j.Kind), APIKey: j.Key, IP: j.IP,
		Method: p.strS(j.Method), Path: j.Path, Proto: p.strS(j.Proto), Status: j.Status, Bytes: -1,
		Referer: j.Referer, UserAgent: j.UserAgent, Route: p.strS(j.Route), Outcome: p.strS(j.Outcome),
		Decision: p.strS(j.Decision), Limit: p.strS(j.Limit), Consumer: p.strS(j.Consumer), Plan: p.strS(j.Plan),
		RequestID: j.RequestID}
	if len(j.Units) > maxUnitsPerLine {
		return fmt.Errorf("units name %d limits, more than %d", len(j.Units), maxUnitsPerLine)
	}
	for name, n := range j.Units {
		v, err := parseUnits(n)
		if err != nil || name == "" {
			return fmt.Errorf("units of %q: %q is not an integer in 0..2^53", name, n)
		}
		e.Units = append(e.Units, Units{Limit: p.strS(name), N: v})
	}
	slices.SortFunc(e.Units, func(a, b Units) int { return strings.Compare(a.Limit, b.Limit) })
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
	if j.RLS != nil {
		if e.Method != "RLS" {
			return errors.New("rls on a line that is not an RLS call")
		}
		return p.fromJSONRLS(j.RLS)
	}
	return nil
}
