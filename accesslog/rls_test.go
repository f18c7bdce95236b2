package accesslog

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func rlsEntry() *Entry {
	return &Entry{Time: time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC), Latency: 1500 * time.Microsecond,
		Status: 429, Outcome: "over_limit", Decision: "denied",
		RLS: &RLSCall{Domain: "edge main", HitsAddend: 3, Code: "over_limit", StoreLatency: 250 * time.Microsecond,
			Descriptors: []RLSDescriptor{
				{Code: "over_limit", Entries: []RLSEntry{{Key: "remote_address", Value: "10.0.0.1"}}},
				{Code: "ok", HasAddend: true, Addend: 0, Entries: []RLSEntry{
					{Key: "path", Value: "/a=b,c;d %x", Matched: true}, {Key: "user", Value: "-"}, {Key: "e", Value: ""}}},
			}}}
}

// TestRLSRoundTrip: a call's line reads back as it was written, in both
// formats: the values the configuration matched as they are (escapes
// and the separators included), the others hashed, "~" marking them.
func TestRLSRoundTrip(t *testing.T) {
	salt := []byte("s")
	hashed := "~" + Hash(salt, "descriptor", "10.0.0.1")
	for _, f := range []Format{Combined, JSONL} {
		for _, raw := range []bool{false, true} {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, Options{Format: f, Salt: salt, RawClient: raw})
			if err != nil {
				t.Fatal(err)
			}
			w.Log(rlsEntry())
			w.Close()
			line := buf.String()
			if strings.Contains(line, "10.0.0.1") != raw {
				t.Fatalf("%v raw=%v: the unmatched value: %s", f, raw, line)
			}
			p := NewParser(strings.NewReader(line), Auto)
			if !p.Next() {
				t.Fatalf("%v: not read back: %v %s", f, p.Malformed(), line)
			}
			e := p.Entry()
			c := e.RLS
			if c == nil || e.Method != "RLS" || e.Status != 429 || e.Outcome != "over_limit" || c.Code != "over_limit" ||
				c.Domain != "edge main" || c.HitsAddend != 3 || c.StoreLatency != 250*time.Microsecond ||
				e.Latency != 1500*time.Microsecond || !e.Time.Equal(rlsEntry().Time) || len(c.Descriptors) != 2 {
				t.Fatalf("%v: %+v %+v\n%s", f, e, c, line)
			}
			d0, d1 := c.Descriptors[0], c.Descriptors[1]
			want0 := hashed
			if raw {
				want0 = "10.0.0.1"
			}
			if d0.Code != "over_limit" || d0.HasAddend || len(d0.Entries) != 1 || d0.Entries[0] != (RLSEntry{Key: "remote_address", Value: want0}) {
				t.Fatalf("%v: descriptor 0 %+v", f, d0)
			}
			user := "~" + Hash(salt, "descriptor", "-")
			empty := "~" + Hash(salt, "descriptor", "")
			if raw {
				user, empty = "-", ""
			}
			if d1.Code != "ok" || !d1.HasAddend || d1.Addend != 0 || len(d1.Entries) != 3 ||
				d1.Entries[0] != (RLSEntry{Key: "path", Value: "/a=b,c;d %x"}) || d1.Entries[1] != (RLSEntry{Key: "user", Value: user}) ||
				d1.Entries[2] != (RLSEntry{Key: "e", Value: empty}) {
				t.Fatalf("%v raw=%v: descriptor 1 %+v\n%s", f, raw, d1, line)
			}
		}
	}
}

// TestRLSBounded: long keys and values are hashed and the descriptors
// past the line's budget are left out and counted, so the largest call
// the service accepts (64 descriptors of 32 entries of 1 MiB values)
// still makes a line the parser reads.
func TestRLSBounded(t *testing.T) {
	long := strings.Repeat("v", 1<<20)
	c := &RLSCall{Domain: "d", Code: "ok"}
	for range 64 {
		d := RLSDescriptor{Code: "ok"}
		for j := range 32 {
			d.Entries = append(d.Entries, RLSEntry{Key: strings.Repeat("k", 60) + string(rune('a'+j%26)), Value: long, Matched: true})
		}
		c.Descriptors = append(c.Descriptors, d)
	}
	for _, f := range []Format{Combined, JSONL} {
		var buf bytes.Buffer
		w, _ := NewWriter(&buf, Options{Format: f, RawClient: true})
		w.Log(&Entry{Time: time.Unix(1, 0), Status: 200, Outcome: "ok", Decision: "allowed", RLS: c})
		w.Close()
		if buf.Len() > maxRLSText+4096 || buf.Len() >= MaxLineBytes {
			t.Fatalf("%v: a line of %d bytes", f, buf.Len())
		}
		p := NewParser(&buf, Auto)
		if !p.Next() {
			t.Fatalf("%v: %v", f, p.Malformed())
		}
		got := p.Entry().RLS
		if got.Dropped == 0 || len(got.Descriptors)+got.Dropped != 64 || strings.Contains(got.Descriptors[0].Entries[0].Value, "vvvv") {
			t.Fatalf("%v: %d descriptors, %d dropped, value %.20q", f, len(got.Descriptors), got.Dropped, got.Descriptors[0].Entries[0].Value)
		}
	}
}

// TestRLSHostileLines: lines a writer never writes are reported as
// malformed, never panic, and never hold more than the service's bounds.
func TestRLSHostileLines(t *testing.T) {
	many := strings.Repeat("ok:k=v;", 65)
	deep := "ok:" + strings.Repeat("k=v,", 33)
	for name, line := range map[string]string{
		"rls on an http line":      `- - - [02/Jan/2006:15:04:05 +0000] "GET / HTTP/1.1" 200 - "-" "-" outcome=ok decision=allowed rls=ok:k=v`,
		"unknown code":             `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=ok decision=allowed rls=fine:k=v`,
		"no code":                  `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=ok decision=allowed rls=k=v`,
		"entry not key=value":      `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=ok decision=allowed rls=ok:kv`,
		"bad escape":               `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=ok decision=allowed rls=ok:k=%zz`,
		"addend not a number":      `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=ok decision=allowed rls=ok+x:k=v`,
		"addend past 2^64":         `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=ok decision=allowed rls=ok+18446744073709551616:k=v`,
		"hits_addend past 2^32":    `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=ok decision=allowed hits_addend=4294967296 rls=ok:k=v`,
		"65 descriptors":           `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=ok decision=allowed rls=` + many,
		"33 entries":               `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=ok decision=allowed rls=` + deep,
		"empty domain":             `- - - [02/Jan/2006:15:04:05 +0000] "RLS - gRPC" 200 - "-" "-" outcome=ok decision=allowed rls=ok:k=v`,
		"unknown outcome":          `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=meh decision=allowed rls=ok:k=v`,
		"no decision":              `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=ok rls=ok:k=v`,
		"only store_latency":       `- - - [02/Jan/2006:15:04:05 +0000] "RLS d gRPC" 200 - "-" "-" outcome=ok decision=allowed store_latency=0.1`,
		"json no descriptor":       `{"time":"2026-01-02T03:04:05Z","method":"RLS","status":200,"outcome":"ok","decision":"allowed","rls":{"domain":"d","descriptors":[]}}`,
		"json unknown code":        `{"time":"2026-01-02T03:04:05Z","method":"RLS","status":200,"outcome":"ok","decision":"allowed","rls":{"domain":"d","descriptors":[{"code":"x","entries":[]}]}}`,
		"json negative dropped":    `{"time":"2026-01-02T03:04:05Z","method":"RLS","status":200,"outcome":"ok","decision":"allowed","rls":{"domain":"d","dropped":-1,"descriptors":[{"code":"ok","entries":[]}]}}`,
		"json addend negative":     `{"time":"2026-01-02T03:04:05Z","method":"RLS","status":200,"outcome":"ok","decision":"allowed","rls":{"domain":"d","descriptors":[{"code":"ok","hits_addend":-1,"entries":[]}]}}`,
		"json 65 descriptors":      `{"time":"2026-01-02T03:04:05Z","method":"RLS","status":200,"outcome":"ok","decision":"allowed","rls":{"domain":"d","descriptors":[` + strings.TrimSuffix(strings.Repeat(`{"code":"ok","entries":[]},`, 65), ",") + `]}}`,
		"json rls on an http line": `{"time":"2026-01-02T03:04:05Z","method":"GET","status":200,"outcome":"ok","decision":"allowed","rls":{"domain":"d","descriptors":[{"code":"ok","entries":[]}]}}`,
		"json rls not object":      `{"time":"2026-01-02T03:04:05Z","method":"RLS","status":200,"outcome":"ok","decision":"allowed","rls":[1]}`,
	} {
		p := NewParser(strings.NewReader(line+"\n"), Auto)
		if p.Next() {
			t.Errorf("%s: read as %+v %+v", name, p.Entry(), p.Entry().RLS)
		} else if p.MalformedCount() != 1 {
			t.Errorf("%s: not reported malformed", name)
		}
	}
}

// BenchmarkAppendRLS is one call's line of two descriptors, one value
// hashed and one written as it is.
func BenchmarkAppendRLS(b *testing.B) {
	for _, f := range []Format{Combined, JSONL} {
		b.Run(f.String(), func(b *testing.B) {
			w, _ := NewWriter(io.Discard, Options{Format: f, Salt: []byte("s")})
			e := &Entry{Time: time.Unix(1_800_000_000, 0), Status: 200, Outcome: "ok", Decision: "allowed",
				RLS: &RLSCall{Domain: "edge", Code: "ok", Descriptors: []RLSDescriptor{
					{Code: "ok", Entries: []RLSEntry{{Key: "remote_address", Value: "10.1.2.3"}}},
					{Code: "ok", Entries: []RLSEntry{{Key: "path", Value: "/login", Matched: true}}}}}}
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = w.Append(buf[:0], e)
			}
		})
	}
}

// TestRLSHostileValues: keys, values and domains a caller chooses come
// back from the line as they were written (raw_client: as sent; hashed
// past the bounds), one line each, in both formats: the rls= value's own
// separators, line breaks, quotes, escapes, the hash mark, "-" and empty
// strings. A call of one descriptor whose keys and values escape to 6
// bytes a byte in JSON keeps that descriptor (a line of none is
// malformed), and a domain past MaxRLSDomain is hashed (the line stays
// under MaxLineBytes).
func TestRLSHostileValues(t *testing.T) {
	ctl := func(n int) string { return strings.Repeat("\x01", n) }
	deep := RLSDescriptor{Code: "no_limit"}
	for j := range 32 {
		deep.Entries = append(deep.Entries, RLSEntry{Key: ctl(63) + string(rune('a'+j%26)), Value: ctl(128)})
	}
	huge := strings.Repeat("d", 100<<10)
	for _, tc := range []struct {
		name   string
		domain string
		descs  []RLSDescriptor
		// wantDomain is the domain read back ("" means the one sent).
		wantDomain string
	}{
		{"separators", "d", []RLSDescriptor{{Code: "ok", Entries: []RLSEntry{{Key: "k=,;:+", Value: "a=b,c;d:e+f"}}}}, ""},
		{"line breaks", "d\nx", []RLSDescriptor{{Code: "ok", Entries: []RLSEntry{{Key: "k\n", Value: "a\r\nb\u2028c"}}}}, ""},
		{"quotes and escapes", `d"`, []RLSDescriptor{{Code: "ok", Entries: []RLSEntry{{Key: `k"\`, Value: `%41"\"%zz`}}}}, ""},
		{"a forged line", "d", []RLSDescriptor{{Code: "ok", Entries: []RLSEntry{{Key: "k", Value: "v\n- - - [02/Jan/2006:15:04:05 +0000] \"RLS d gRPC\" 200 - \"-\" \"-\" outcome=ok decision=allowed rls=ok:k=v"}}}}, ""},
		{"hash mark, dash and empty", "-", []RLSDescriptor{{Code: "ok", Entries: []RLSEntry{{Key: "-", Value: "~x"}, {Key: "", Value: "-"}, {Key: "e", Value: ""}}}}, ""},
		{"tabs and spaces", "a b", []RLSDescriptor{{Code: "ok", Entries: []RLSEntry{{Key: "k\t", Value: " a\tb "}}}}, ""},
		{"non-ASCII", "dü", []RLSDescriptor{{Code: "ok", Entries: []RLSEntry{{Key: "ключ", Value: "值"}}}}, ""},
		{"one descriptor of 32 escaped entries", "d", []RLSDescriptor{deep}, ""},
		{"a huge domain", huge, []RLSDescriptor{{Code: "no_limit", Entries: []RLSEntry{{Key: "k", Value: "v"}}}}, "~" + Hash([]byte("s"), "rls_domain", huge)},
	} {
		for _, f := range []Format{Combined, JSONL} {
			c := &RLSCall{Domain: tc.domain, Code: "ok", Descriptors: tc.descs}
			var buf bytes.Buffer
			w, _ := NewWriter(&buf, Options{Format: f, RawClient: true, Salt: []byte("s")})
			w.Log(&Entry{Time: time.Unix(1, 0), Status: 200, Outcome: "ok", Decision: "allowed", RLS: c})
			w.Close()
			line := buf.String()
			if strings.Count(line, "\n") != 1 || len(line) >= MaxLineBytes {
				t.Fatalf("%s %v: %d bytes, %d line breaks", tc.name, f, len(line), strings.Count(line, "\n"))
			}
			p := NewParser(&buf, Auto)
			if !p.Next() {
				t.Fatalf("%s %v: %v\n%.300s", tc.name, f, p.Malformed(), line)
			}
			got := p.Entry().RLS
			want := tc.wantDomain
			if want == "" {
				want = tc.domain
			}
			if got.Domain != want || got.Dropped != 0 || len(got.Descriptors) != len(tc.descs) {
				t.Fatalf("%s %v: domain %.40q, %d descriptors, %d dropped", tc.name, f, got.Domain, len(got.Descriptors), got.Dropped)
			}
			for i, d := range tc.descs {
				for j, e := range d.Entries {
					if g := got.Descriptors[i].Entries[j]; g.Key != e.Key || g.Value != e.Value {
						t.Fatalf("%s %v: entry %d.%d read back as %q=%q, written %q=%q", tc.name, f, i, j, g.Key, g.Value, e.Key, e.Value)
					}
				}
			}
			if p.Next() {
				t.Fatalf("%s %v: a second line", tc.name, f)
			}
		}
	}
}

// TestRLSNamedBounds: a key or value the configuration names is written
// as it is up to MaxRLSNamed bytes (hashed past it, and a caller's key or
// value past MaxRLSKey / MaxRLSValue as before); a first descriptor of
// named entries past maxRLSFirst is written again with the caller's
// bounds, so the line still holds it and stays under MaxLineBytes.
func TestRLSNamedBounds(t *testing.T) {
	salt := []byte("s")
	k300, v300, k600 := strings.Repeat("k", 300), strings.Repeat("v", 300), strings.Repeat("k", 600)
	ctl := strings.Repeat("\x01", MaxRLSNamed)
	huge := RLSDescriptor{Code: "ok"}
	for j := range 32 {
		huge.Entries = append(huge.Entries, RLSEntry{Key: ctl[:MaxRLSNamed-1] + string(rune('a'+j%26)), Value: ctl, Named: true, Matched: true})
	}
	for _, f := range []Format{Combined, JSONL} {
		c := &RLSCall{Domain: "d", Code: "ok", Descriptors: []RLSDescriptor{
			{Code: "ok", Entries: []RLSEntry{{Key: k300, Value: v300, Named: true, Matched: true}, {Key: k600, Value: v300, Named: true}}},
			{Code: "no_limit", Entries: []RLSEntry{{Key: k300, Value: "x"}}},
		}}
		var buf bytes.Buffer
		w, _ := NewWriter(&buf, Options{Format: f, Salt: salt})
		w.Log(&Entry{Time: time.Unix(1, 0), Status: 200, Outcome: "ok", Decision: "allowed", RLS: c})
		w.Log(&Entry{Time: time.Unix(2, 0), Status: 200, Outcome: "ok", Decision: "allowed", RLS: &RLSCall{Domain: "d", Descriptors: []RLSDescriptor{huge}}})
		w.Close()
		p := NewParser(&buf, Auto)
		if !p.Next() {
			t.Fatalf("%v: %v", f, p.Malformed())
		}
		got := p.Entry().RLS.Descriptors
		want := [][2]string{{k300, v300}, {"~" + Hash(salt, "descriptor_key", k600), "~" + Hash(salt, "descriptor", v300)}}
		for j, kv := range want {
			if e := got[0].Entries[j]; e.Key != kv[0] || e.Value != kv[1] {
				t.Fatalf("%v: named entry %d read back as %.40q=%.40q", f, j, e.Key, e.Value)
			}
		}
		if e := got[1].Entries[0]; e.Key != "~"+Hash(salt, "descriptor_key", k300) {
			t.Fatalf("%v: a caller's long key read back as %.40q", f, e.Key)
		}
		if !p.Next() {
			t.Fatalf("%v: the huge named descriptor's line: %v", f, p.Malformed())
		}
		hd := p.Entry().RLS.Descriptors
		if len(hd) != 1 || len(hd[0].Entries) != 32 || hd[0].Entries[0].Key != "~"+Hash(salt, "descriptor_key", huge.Entries[0].Key) {
			t.Fatalf("%v: huge named descriptor read back as %d descriptors", f, len(hd))
		}
	}
}
