package redisstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
)

//go:embed override.lua
var overridesSrc string

var overridesScript = redis.NewScript(overridesSrc)

var _ ratelimit.OverrideTable = (*Store)(nil)

// overridesKey is the hash holding the override table. Its own hash tag
// keeps it in one Cluster slot whatever the prefix.
func (s *Store) overridesKey() string { return s.opts.Prefix + "{tollgate-overrides}" }

// versionField is the hash field holding the table's version.
const versionField = "#v"

// storedOverride is an override's JSON in its hash field.
type storedOverride struct {
	Limit       string   `json:"limit"`
	Subject     string   `json:"subject"`
	Scope       string   `json:"scope"`
	Rates       []string `json:"rates,omitempty"`
	Burst       int64    `json:"burst,omitempty"`
	MaxInFlight int64    `json:"max_in_flight,omitempty"`
	Expires     int64    `json:"expires_us"`
	Created     int64    `json:"created_us"`
	Label       string   `json:"label,omitempty"`
	Reason      string   `json:"reason,omitempty"`
}

func overrideField(limit, subject string) string { return limit + "\x00" + subject }

// PutOverride implements ratelimit.OverrideTable with one script call, so
// that the bound holds however many gateways write at once.
func (s *Store) PutOverride(ctx context.Context, now time.Time, o ratelimit.Override, max int) error {
	so := storedOverride{Limit: o.Limit, Subject: o.Subject, Scope: o.Scope, Burst: o.Burst, MaxInFlight: o.MaxInFlight,
		Expires: o.Expires.UnixMicro(), Created: o.Created.UnixMicro(), Label: o.Label, Reason: o.Reason}
	for _, r := range o.Rates {
		so.Rates = append(so.Rates, r.String())
	}
	body, err := json.Marshal(so)
	if err != nil {
		return fmt.Errorf("redisstore: override: %w", err)
	}
	value := strconv.FormatInt(so.Expires, 10) + " " + string(body)
	res, err := s.runScript(ctx, s.client, "overrides", overridesScript, []string{s.overridesKey()},
		"put", now.UnixMicro(), overrideField(o.Limit, o.Subject), value, max).Int()
	if err != nil {
		return fmt.Errorf("%w: redis: override table: %w", ratelimit.ErrStore, err)
	}
	if res == 0 {
		return ratelimit.ErrTooManyOverrides
	}
	return nil
}

// DeleteOverride implements ratelimit.OverrideTable.
func (s *Store) DeleteOverride(ctx context.Context, limit, subject string) (bool, error) {
	res, err := s.runScript(ctx, s.client, "overrides", overridesScript, []string{s.overridesKey()}, "del", overrideField(limit, subject)).Int()
	if err != nil {
		return false, fmt.Errorf("%w: redis: override table: %w", ratelimit.ErrStore, err)
	}
	return res == 1, nil
}

// Overrides implements ratelimit.OverrideTable: one HGET of the version,
// and an HGETALL only when it changed. A table never written has version
// 1. A field that does not parse (written by hand) is skipped.
func (s *Store) Overrides(ctx context.Context, known uint64) (uint64, []ratelimit.Override, error) {
	key := s.overridesKey()
	v, err := s.client.HGet(ctx, key, versionField).Uint64()
	switch {
	case errors.Is(err, redis.Nil):
		v = 1
	case err != nil:
		return 0, nil, fmt.Errorf("%w: redis: override table: %w", ratelimit.ErrStore, err)
	}
	if v == known {
		return v, nil, nil
	}
	all, err := s.client.HGetAll(ctx, key).Result()
	if err != nil {
		return 0, nil, fmt.Errorf("%w: redis: override table: %w", ratelimit.ErrStore, err)
	}
	if fv, err := strconv.ParseUint(all[versionField], 10, 64); err == nil {
		v = fv // the version of what was read, if it changed in between
	}
	list := make([]ratelimit.Override, 0, len(all))
	for f, val := range all {
		if f == versionField {
			continue
		}
		if o, ok := parseOverride(val); ok {
			list = append(list, o)
		}
	}
	return v, list, nil
}

func parseOverride(val string) (ratelimit.Override, bool) {
	_, body, ok := strings.Cut(val, " ")
	var so storedOverride
	if !ok || json.Unmarshal([]byte(body), &so) != nil {
		return ratelimit.Override{}, false
	}
	o := ratelimit.Override{Limit: so.Limit, Subject: so.Subject, Scope: so.Scope, Burst: so.Burst, MaxInFlight: so.MaxInFlight,
		Expires: time.UnixMicro(so.Expires), Created: time.UnixMicro(so.Created), Label: so.Label, Reason: so.Reason}
	for _, r := range so.Rates {
		rate, err := ratelimit.ParseRate(r)
		if err != nil {
			return ratelimit.Override{}, false
		}
		o.Rates = append(o.Rates, rate)
	}
	return o, true
}
