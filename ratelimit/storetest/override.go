package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// RunOverrides runs the conformance suite of ratelimit.OverrideTable
// against tables made by newTable, one fresh (empty) table per subtest.
func RunOverrides(t *testing.T, newTable func(t *testing.T) ratelimit.OverrideTable) {
	t.Run("Empty", func(t *testing.T) { overridesEmpty(t, newTable(t)) })
	t.Run("PutReplaceDelete", func(t *testing.T) { overridesPut(t, newTable(t)) })
	t.Run("Bound", func(t *testing.T) { overridesBound(t, newTable(t)) })
	t.Run("ExpiredDropped", func(t *testing.T) { overridesExpired(t, newTable(t)) })
}

// sample is an override with every field set, at whole microseconds
// (the resolution stores keep).
func sample(limit, subject string, expires time.Time) ratelimit.Override {
	return ratelimit.Override{
		Limit: limit, Subject: subject, Scope: "by=client;missing=0",
		Rates:   []ratelimit.Rate{{Limit: 1000, Window: time.Second}, {Limit: 5, Window: 24 * time.Hour}},
		Burst:   7,
		Expires: expires, Created: t0.Add(time.Microsecond),
		Label: "ip:203.0.113.7", Reason: "a deal \"with\" quotes, ünïcode and\nnewlines",
	}
}

func read(t *testing.T, tb ratelimit.OverrideTable, known uint64) (uint64, []ratelimit.Override) {
	t.Helper()
	v, list, err := tb.Overrides(context.Background(), known)
	if err != nil {
		t.Fatalf("Overrides(%d): %v", known, err)
	}
	if v == 0 {
		t.Fatalf("Overrides(%d): version 0", known)
	}
	slices.SortFunc(list, func(a, b ratelimit.Override) int {
		return strings.Compare(a.Limit+"\x00"+a.Subject, b.Limit+"\x00"+b.Subject)
	})
	return v, list
}

func put(t *testing.T, tb ratelimit.OverrideTable, now time.Time, o ratelimit.Override, max int) error {
	t.Helper()
	return tb.PutOverride(context.Background(), now, o, max)
}

func sameOverride(a, b ratelimit.Override) bool {
	return a.Limit == b.Limit && a.Subject == b.Subject && a.Scope == b.Scope && slices.Equal(a.Rates, b.Rates) &&
		a.Burst == b.Burst && a.MaxInFlight == b.MaxInFlight && a.Expires.Equal(b.Expires) &&
		a.Created.Equal(b.Created) && a.Label == b.Label && a.Reason == b.Reason
}

func overridesEmpty(t *testing.T, tb ratelimit.OverrideTable) {
	v, list := read(t, tb, 0)
	if len(list) != 0 {
		t.Fatalf("new table holds %d overrides", len(list))
	}
	v2, list := read(t, tb, v)
	if v2 != v || list != nil {
		t.Fatalf("unchanged table: version %d → %d, list %v; want the same version and no list", v, v2, list)
	}
}

func overridesPut(t *testing.T, tb ratelimit.OverrideTable) {
	v0, _ := read(t, tb, 0)
	a := sample("per-consumer", "consumer:acme", t0.Add(time.Hour))
	if err := put(t, tb, t0, a, 10); err != nil {
		t.Fatal(err)
	}
	v1, list := read(t, tb, v0)
	if v1 == v0 || len(list) != 1 || !sameOverride(list[0], a) {
		t.Fatalf("after a put: version %d → %d, list %+v; want a new version and %+v", v0, v1, list, a)
	}
	// The same limit and subject replace it; another subject adds one.
	a2 := a
	a2.Rates, a2.Burst, a2.Reason = []ratelimit.Rate{{Limit: 3, Window: time.Minute}}, 0, "smaller"
	b := sample("per-consumer", "key:{x}y", t0.Add(2*time.Hour))
	c := sample("other", "consumer:acme", t0.Add(2*time.Hour))
	c.Rates, c.Burst, c.MaxInFlight = nil, 0, 9
	for _, o := range []ratelimit.Override{a2, b, c} {
		if err := put(t, tb, t0, o, 10); err != nil {
			t.Fatal(err)
		}
	}
	v2, list := read(t, tb, v1)
	want := []ratelimit.Override{c, a2, b}
	if v2 == v1 || len(list) != 3 {
		t.Fatalf("after replace and adds: version %d → %d, %d overrides; want a new version and 3", v1, v2, len(list))
	}
	for i := range want {
		if !sameOverride(list[i], want[i]) {
			t.Errorf("override %d: %+v, want %+v", i, list[i], want[i])
		}
	}
	found, err := tb.DeleteOverride(context.Background(), "per-consumer", "consumer:acme")
	if err != nil || !found {
		t.Fatalf("DeleteOverride = %v, %v; want true", found, err)
	}
	found, err = tb.DeleteOverride(context.Background(), "per-consumer", "consumer:acme")
	if err != nil || found {
		t.Fatalf("second DeleteOverride = %v, %v; want false", found, err)
	}
	v3, list := read(t, tb, v2)
	if v3 == v2 || len(list) != 2 || !sameOverride(list[0], c) || !sameOverride(list[1], b) {
		t.Fatalf("after delete: version %d → %d, list %+v", v2, v3, list)
	}
	for _, v := range []uint64{v0, v1, v2} {
		if v == v3 {
			t.Errorf("version %d came back", v)
		}
	}
}

func overridesBound(t *testing.T, tb ratelimit.OverrideTable) {
	exp := t0.Add(time.Hour)
	for _, s := range []string{"a", "b"} {
		if err := put(t, tb, t0, sample("l", s, exp), 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := put(t, tb, t0, sample("l", "c", exp), 2); !errors.Is(err, ratelimit.ErrTooManyOverrides) {
		t.Fatalf("third override into a table of 2: %v, want ErrTooManyOverrides", err)
	}
	// Replacing one keeps the count.
	if err := put(t, tb, t0, sample("l", "a", exp.Add(time.Hour)), 2); err != nil {
		t.Fatalf("replacing in a full table: %v", err)
	}
	if _, list := read(t, tb, 0); len(list) != 2 || list[0].Subject != "a" || !list[0].Expires.Equal(exp.Add(time.Hour)) {
		t.Fatalf("full table: %+v", list)
	}
}

func overridesExpired(t *testing.T, tb ratelimit.OverrideTable) {
	if err := put(t, tb, t0, sample("l", "old", t0.Add(time.Second)), 1); err != nil {
		t.Fatal(err)
	}
	// Still in force a microsecond before it expires: the table is full.
	if err := put(t, tb, t0.Add(time.Second-time.Microsecond), sample("l", "new", t0.Add(time.Hour)), 1); !errors.Is(err, ratelimit.ErrTooManyOverrides) {
		t.Fatalf("put before the old one expired: %v, want ErrTooManyOverrides", err)
	}
	// At its expiry it is dropped and makes room.
	if err := put(t, tb, t0.Add(time.Second), sample("l", "new", t0.Add(time.Hour)), 1); err != nil {
		t.Fatalf("put once the old one expired: %v", err)
	}
	if _, list := read(t, tb, 0); len(list) != 1 || list[0].Subject != "new" {
		t.Fatalf("after expiry: %+v, want only the new override", list)
	}
}
