package topk

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTopHostileInputs: what a client can send to the tracker — endless
// new identities, huge identities, one value under several kinds — never
// grows its memory past k entries per sketch nor merges distinct clients.
func TestTopHostileInputs(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name  string
		feed  func(tr *Tracker, l *Limit)
		check func(t *testing.T, top Top, l *Limit)
	}{
		{"100k distinct clients keep k entries", func(tr *Tracker, l *Limit) {
			for i := range 100_000 {
				tr.Record(l, now, "ip", fmt.Sprint("10.", i>>16, ".", (i>>8)&255, ".", i&255), true, false, false, -1)
			}
		}, func(t *testing.T, top Top, l *Limit) {
			for _, w := range l.denied {
				for _, b := range w.ring {
					if b.s.Len() > 4 || cap(b.s.slots) != 4 {
						t.Fatalf("a sketch holds %d entries (cap %d), want ≤ 4", b.s.Len(), cap(b.s.slots))
					}
				}
			}
			if top.Denied.Total != 100_000 || len(top.Denied.Clients) != 4 {
				t.Fatalf("total %d, %d clients", top.Denied.Total, len(top.Denied.Clients))
			}
		}},
		{"same value, different kinds stay apart", func(tr *Tracker, l *Limit) {
			for range 5 {
				tr.Record(l, now, "ip", "1.2.3.4", true, false, false, -1)
			}
			for range 3 {
				tr.Record(l, now, "user", "1.2.3.4", true, false, false, -1)
			}
		}, func(t *testing.T, top Top, l *Limit) {
			if len(top.Denied.Clients) != 2 || top.Denied.Clients[0].Count != 5 || top.Denied.Clients[1].Count != 3 {
				t.Fatalf("%+v", top.Denied.Clients)
			}
		}},
		{"a 64 KiB identity is counted, shown hashed", func(tr *Tracker, l *Limit) {
			tr.Record(l, now, "header", strings.Repeat("x", 64<<10), true, false, false, -1)
		}, func(t *testing.T, top Top, l *Limit) {
			if len(top.Denied.Clients) != 1 || len(top.Denied.Clients[0].Client) > 64 {
				t.Fatalf("%+v", top.Denied.Clients)
			}
		}},
		{"allowed clients far from the limit are never tracked", func(tr *Tracker, l *Limit) {
			for i := range 1000 {
				tr.Record(l, now, "ip", fmt.Sprint(i), false, false, false, -1)
			}
		}, func(t *testing.T, top Top, l *Limit) {
			if l.denied[0] != nil || l.near[0] != nil || l.Allowed.Load() != 1000 {
				t.Fatalf("sketches made for allowed traffic: %+v", top)
			}
		}},
		{"a client without identity is counted, not listed", func(tr *Tracker, l *Limit) {
			tr.Record(l, now, "", "", true, false, false, -1)
		}, func(t *testing.T, top Top, l *Limit) {
			if l.Denied.Load() != 1 || len(top.Denied.Clients) != 0 {
				t.Fatalf("%+v", top)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(4, func(kind, value string) string {
				if len(value) > 32 {
					return fmt.Sprintf("%.16x", len(value))
				}
				return value
			})
			l := tr.Limit("l")
			tc.feed(tr, l)
			tc.check(t, tr.Top("l", l, "1m", now, 0), l)
		})
	}
}
