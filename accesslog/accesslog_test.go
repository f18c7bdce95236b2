package accesslog

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.FixedZone("", 2*3600))

func sample() []Entry {
	return []Entry{
		{Time: t0, Client: "k-123", ClientKind: "api_key", APIKey: "k-123", IP: "203.0.113.9", Method: "GET",
			Path: "/v1/search", Proto: "HTTP/1.1", Status: 200, Bytes: 512, Referer: "https://example.com/a b",
			UserAgent: `curl/8.5 "quoted" \ back`, Route: "search", Outcome: "forwarded", Decision: "allowed",
			Limit: "per-client", Latency: 1234 * time.Microsecond},
		{Time: t0.Add(time.Millisecond), Client: "203.0.113.9", ClientKind: "ip", IP: "203.0.113.9", Method: "POST",
			Path: "/v1/ütf8 100%/-", Proto: "HTTP/2.0", Status: 429, Bytes: -1, Route: "search", Outcome: "limited",
			Decision: "denied", Limit: "search", Latency: 3 * time.Microsecond},
		{Time: t0.Add(2 * time.Second).UTC(), Client: "-", ClientKind: "user", Method: "DELETE", Path: "-",
			Status: 404, Bytes: 0, Outcome: "no_route", Latency: 90 * time.Second},
		{Time: t0, Client: "x\x00\n\r\"y\xff", ClientKind: "user", Method: "GET", Path: "/\x00\t\xfe", Status: 499, Bytes: 7},
		{Time: t0, Client: "acme", ClientKind: "consumer", IP: "198.51.100.1", Method: "GET", Path: "/v1", Status: 200,
			Bytes: 2, Route: "api", Outcome: "forwarded", Decision: "allowed", Limit: "per-consumer", Consumer: "acme", Plan: "pro"},
		{Time: t0, Client: "u1", ClientKind: "user", Method: "GET", Path: "/v1", Status: 200, Bytes: 2, Plan: "free"},
		{Time: t0, Client: "u2", ClientKind: "user", Method: "GET", Path: "/v1", Status: 200, Bytes: 2, RequestID: "0123456789abcdef0123456789abcdef"},
		{Time: t0, Client: "acme", ClientKind: "consumer", Method: "GET", Path: "/v1", Status: 429, Bytes: 2, Consumer: "acme",
			Plan: "pro", RequestID: "lb-7f3a/0001~%-"},
		{Time: t0, Client: "k", ClientKind: "api_key", Method: "POST", Path: "/v1/chat", Status: 200, Bytes: 90,
			Units: []Units{{Limit: "peek", N: 0}, {Limit: "tokens", N: 9007199254740992}}},
	}
}

// TestUnitsHostile: a line's units must name limits with integers in
// 0..2^53, at most 64 of them; anything else fails the line.
func TestUnitsHostile(t *testing.T) {
	base := `{"time":"2024-01-02T03:04:05Z","method":"GET","path":"/","status":200,"latency":0.1,"units":`
	for _, bad := range []string{`{"t":-1}`, `{"t":1.5}`, `{"t":"3"}`, `{"t":9007199254740993}`, `{"t":1e3}`, `{"":3}`, `[1]`, `{"t":{"n":1}}`} {
		p := NewParser(nil, Auto)
		if err := p.parse([]byte(base + bad + `}`)); err == nil {
			t.Errorf("jsonl units %s accepted: %+v", bad, p.e.Units)
		}
	}
	cbase := `k - - [02/Jan/2024:03:04:05.000000 +0000] "GET / HTTP/1.1" 200 2 "-" "-" route=r outcome=forwarded decision=allowed limit=l latency=0.1 kind=ip key=- ip=1.2.3.4 units=`
	for _, bad := range []string{"t", "t:", ":3", "t:-1", "t:1.5", "t:9007199254740993", "t:3,", strings.Repeat("t:1,", 65) + "t:1"} {
		p := NewParser(nil, Auto)
		if err := p.parse([]byte(cbase + bad)); err == nil {
			t.Errorf("combined units %q accepted: %+v", bad, p.e.Units)
		}
	}
}

// logged returns what a parser reads back for e written with opts.
func logged(e Entry, o Options) Entry {
	if e.Client != "" && (!o.RawClient || e.ClientKind == "api_key") {
		e.Client = Hash(o.Salt, e.ClientKind, e.Client)
	}
	if !o.RawClient {
		if e.IP != "" {
			e.IP = Hash(o.Salt, "ip", e.IP)
		}
	}
	if e.APIKey != "" {
		e.APIKey = Hash(o.Salt, "api_key", e.APIKey)
	}
	return e
}

func sameEntry(a, b Entry) bool {
	ta, tb := a.Time, b.Time
	ua, ub := a.Units, b.Units
	a.Time, b.Time = time.Time{}, time.Time{}
	a.Units, b.Units = nil, nil
	return reflect.DeepEqual(a, b) && ta.Equal(tb) && slices.Equal(ua, ub)
}

func TestRoundTrip(t *testing.T) {
	for _, f := range []Format{Combined, JSONL} {
		for _, raw := range []bool{false, true} {
			o := Options{Format: f, RawClient: raw, Salt: []byte("s")}
			t.Run(fmt.Sprintf("%s/raw=%v", f, raw), func(t *testing.T) {
				var buf bytes.Buffer
				w, err := NewWriter(&buf, o)
				if err != nil {
					t.Fatal(err)
				}
				in := sample()
				for i := range in {
					w.Log(&in[i])
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				for _, pf := range []Format{f, Auto} {
					p := NewParser(bytes.NewReader(buf.Bytes()), pf)
					i := 0
					for ; p.Next(); i++ {
						if i >= len(in) {
							t.Fatalf("more entries than written")
						}
						want := logged(in[i], o)
						if f == JSONL {
							// JSON carries text as UTF-8: invalid bytes become U+FFFD.
							want.Client = strings.ToValidUTF8(want.Client, "\uFFFD")
							want.Path = strings.ToValidUTF8(want.Path, "\uFFFD")
						}
						if got := *p.Entry(); !sameEntry(got, want) {
							t.Errorf("entry %d (line %d):\n got %+v\nwant %+v", i, p.Line(), got, want)
						}
					}
					if i != len(in) || p.Err() != nil || p.MalformedCount() != 0 {
						t.Fatalf("read %d entries, err %v, malformed %v; want %d clean\n%s", i, p.Err(), p.Malformed(), len(in), buf.String())
					}
				}
			})
		}
	}
}

// TestRequestIDLines: lines written before request ids existed (no
// request_id field) and lines with one both parse, in both formats, and
// the ids are not interned (each is unique).
func TestRequestIDLines(t *testing.T) {
	const (
		oldJSON     = `{"time":"2025-03-14T15:09:26.535897+02:00","client":"c","kind":"ip","method":"GET","path":"/v1","proto":"HTTP/1.1","status":200,"bytes":2,"route":"api","outcome":"forwarded","latency":0.001234}`
		newJSON     = `{"time":"2025-03-14T15:09:26.535897+02:00","client":"c","kind":"ip","method":"GET","path":"/v1","proto":"HTTP/1.1","status":200,"bytes":2,"route":"api","outcome":"forwarded","request_id":"abc123","latency":0.001234}`
		oldCombined = `c - - [14/Mar/2025:15:09:26.535897 +0200] "GET /v1 HTTP/1.1" 200 2 "-" "-" route=api outcome=forwarded decision=- limit=- latency=0.001234 kind=ip key=- ip=c`
		newCombined = oldCombined + " request_id=abc123"
	)
	for _, tc := range []struct{ line, want string }{{oldJSON, ""}, {newJSON, "abc123"}, {oldCombined, ""}, {newCombined, "abc123"}} {
		p := NewParser(strings.NewReader(tc.line+"\n"), Auto)
		if !p.Next() {
			t.Fatalf("%s: not parsed: %v %v", tc.line, p.Err(), p.Malformed())
		}
		if got := p.Entry().RequestID; got != tc.want || p.Entry().Route != "api" {
			t.Errorf("%s: request id %q, want %q", tc.line, got, tc.want)
		}
		if _, interned := p.intern[tc.want]; interned && tc.want != "" {
			t.Errorf("request id %q interned", tc.want)
		}
	}
}

func TestCombinedLine(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Options{RawClient: true})
	e := sample()[0]
	w.Log(&e)
	w.Flush()
	// raw_client logs identities as they are, but an API key is a
	// credential: hashed, as in key=.
	want := Hash(nil, "api_key", "k-123") + ` - - [14/Mar/2025:15:09:26.535897 +0200] "GET /v1/search HTTP/1.1" 200 512 "https://example.com/a%20b" "curl/8.5%20%22quoted%22%20%5C%20back" route=search outcome=forwarded decision=allowed limit=per-client latency=0.001234 kind=api_key key=` +
		Hash(nil, "api_key", "k-123") + " ip=203.0.113.9\n"
	if buf.String() != want {
		t.Errorf("line:\n got %q\nwant %q", buf.String(), want)
	}
}

func TestHashed(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Options{Format: JSONL})
	e := sample()[0]
	w.Log(&e)
	w.Close()
	if strings.Contains(buf.String(), "k-123") || strings.Contains(buf.String(), "203.0.113.9") {
		t.Errorf("raw identity in a hashed log: %s", buf.String())
	}
	if Hash(nil, "api_key", "1.2.3.4") == Hash(nil, "ip", "1.2.3.4") {
		t.Errorf("an API key equal to an IP's text hashes like the IP")
	}
}

func TestMalformedLines(t *testing.T) {
	good := `1.2.3.4 - - [14/Mar/2025:15:09:26.5 +0000] "GET /a HTTP/1.1" 200 5 "-" "-" route=r latency=0.5`
	in := strings.Join([]string{
		good,
		"garbage",
		"",
		`1.2.3.4 - - [14/Mar/2025:15:09:26 +0000] "GET /a HTTP/1.1" 2000 5`,
		`{"time":"2025-03-14T15:09:26.123456Z","method":"GET","path":"/j","status":201,"latency":0.25}`,
		`{"time":"yesterday","method":"GET","status":200}`,
		`{"method":"GET"`,
		`1.2.3.4 - - [14/Mar/2025:15:09:26 +0000] "GET /a%G0 HTTP/1.1" 200 5`,
		strings.Repeat("x", MaxLineBytes+10),
		`1.2.3.4 - - [14/Mar/2025:15:09:26 +0000] "GET /a HTTP/1.1" 200 5 route=r latency=-1`,
		// nginx's own combined line, \" inside the user agent.
		`10.0.0.1 - bob [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://x/" "Mozilla \"4.08\""`,
	}, "\n")
	var seen []int
	p := NewParser(strings.NewReader(in), Auto)
	p.OnMalformed = func(le LineError) { seen = append(seen, le.Line) }
	var got []string
	for p.Next() {
		e := p.Entry()
		got = append(got, fmt.Sprintf("%d:%s %s %d %s %v", p.Line(), e.Method, e.Path, e.Status, e.Route, e.Latency))
	}
	if p.Err() != nil {
		t.Fatal(p.Err())
	}
	want := []string{"1:GET /a 200 r 500ms", "5:GET /j 201  250ms", "11:GET /apache_pb.gif 200  0s"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("entries %q, want %q", got, want)
	}
	wantBad := []int{2, 4, 6, 7, 8, 9, 10}
	var bad []int
	for _, le := range p.Malformed() {
		bad = append(bad, le.Line)
		if !strings.HasPrefix(le.Error(), fmt.Sprintf("line %d: ", le.Line)) {
			t.Errorf("error %q does not start with its line number", le.Error())
		}
	}
	if fmt.Sprint(bad) != fmt.Sprint(wantBad) || fmt.Sprint(seen) != fmt.Sprint(wantBad) || p.MalformedCount() != len(wantBad) {
		t.Errorf("malformed lines %v (callback %v, count %d), want %v", bad, seen, p.MalformedCount(), wantBad)
	}
}

func TestWriterConcurrent(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Options{Format: JSONL, BufferSize: 256, FlushInterval: time.Millisecond})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := sample()[0]
			for i := 0; i < 200; i++ {
				w.Log(&e)
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Log(&sample()[0]) // after Close: dropped, no panic
	p := NewParser(&buf, JSONL)
	n := 0
	for p.Next() {
		n++
	}
	if n != 1600 || p.MalformedCount() != 0 {
		t.Errorf("read %d lines, %d malformed (%v); want 1600 clean", n, p.MalformedCount(), p.Malformed())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriterError(t *testing.T) {
	w, _ := NewWriter(failWriter{}, Options{BufferSize: 16})
	e := sample()[0]
	w.Log(&e)
	if err := w.Close(); err != io.ErrClosedPipe {
		t.Errorf("Close = %v, want the write error", err)
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"combined": Combined, "jsonl": JSONL, "json": JSONL, "": Auto} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("clf"); err == nil {
		t.Error("ParseFormat(clf) succeeded")
	}
}

// FuzzParser feeds arbitrary input to the parser: it must never panic,
// every line is either an entry or a malformed line, every entry it
// returns is well-formed, and writing that entry back raw and reading it
// again gives the same entry.
func FuzzParser(f *testing.F) {
	var buf bytes.Buffer
	for _, fm := range []Format{Combined, JSONL} {
		w, _ := NewWriter(&buf, Options{Format: fm, RawClient: true})
		for _, e := range sample() {
			w.Log(&e)
		}
		w.Close()
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		f.Add(line)
	}
	f.Add(`10.0.0.1 - bob [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://x/" "Mozilla \"4.08\""`) // nginx
	f.Add("{}")                                                                                                                // no fields
	f.Add("a - - [x] \"\" 1 -")                                                                                                // bad time
	f.Add("\n\n\r\n")                                                                                                          // blank lines
	f.Add(`{"time":"2025-03-14T15:09:26Z","method":"GET","status":200,"bytes":-5}`)                                            // negative bytes
	f.Fuzz(func(t *testing.T, in string) {
		p := NewParser(strings.NewReader(in), Auto)
		n := 0
		for p.Next() {
			n++
			e := *p.Entry()
			if e.Method == "" || e.Status < 100 || e.Status > 999 || e.Time.IsZero() || e.Latency < 0 || e.Bytes < -1 {
				t.Fatalf("ill-formed entry %+v", e)
			}
			// Re-encode raw in combined (the lossless format) and read back.
			var out bytes.Buffer
			w, _ := NewWriter(&out, Options{RawClient: true})
			e.APIKey = "" // the writer hashes keys; the round trip is for the rest
			w.Log(&e)
			w.Close()
			q := NewParser(&out, Combined)
			if !q.Next() {
				t.Fatalf("re-encoded entry does not parse: %q: %v", out.String(), q.Malformed())
			}
			back := *q.Entry()
			if e.ClientKind == "api_key" && e.Client != "" {
				e.Client = Hash(nil, "api_key", e.Client) // never logged raw
			}
			back.Time, e.Time = back.Time.Truncate(time.Microsecond), e.Time.Truncate(time.Microsecond)
			e.Latency = e.Latency.Truncate(time.Microsecond)
			if !sameEntry(back, e) {
				t.Fatalf("round trip:\n got %+v\nwant %+v\nline %q", back, e, out.String())
			}
		}
		if p.Err() != nil {
			t.Fatalf("read error from a string reader: %v", p.Err())
		}
		if n+p.MalformedCount() > strings.Count(in, "\n")+1 {
			t.Fatalf("%d entries + %d malformed > lines", n, p.MalformedCount())
		}
	})
}

func benchLog(b *testing.B, f Format, lines int) []byte {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Options{Format: f})
	in := sample()[:2]
	for i := 0; i < lines; i++ {
		e := in[i%2]
		e.Time = t0.Add(time.Duration(i) * time.Millisecond)
		w.Log(&e)
	}
	w.Close()
	return buf.Bytes()
}

// BenchmarkParse reports the time per line; ×1e6 is the time for a
// million-line log.
func BenchmarkParse(b *testing.B) {
	for _, f := range []Format{Combined, JSONL} {
		b.Run(f.String(), func(b *testing.B) {
			data := benchLog(b, f, 10000)
			b.SetBytes(int64(len(data) / 10000))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; {
				p := NewParser(bytes.NewReader(data), f)
				for i < b.N && p.Next() {
					i++
				}
				if p.MalformedCount() != 0 {
					b.Fatal(p.Malformed())
				}
			}
		})
	}
}

func BenchmarkLog(b *testing.B) {
	for _, f := range []Format{Combined, JSONL} {
		b.Run(f.String(), func(b *testing.B) {
			w, _ := NewWriter(io.Discard, Options{Format: f})
			e := sample()[0]
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w.Log(&e)
				}
			})
		})
	}
}

// TestOptionsClient: reports outside the log show a client as the log
// does; an API key is hashed even with RawClient; a consumer is shown by
// its name (the log's consumer field) either way.
func TestOptionsClient(t *testing.T) {
	for _, o := range []Options{{}, {RawClient: true}, {Salt: []byte("salt")}} {
		if got := o.Client("consumer", "acme"); got != "acme" {
			t.Errorf("%+v: consumer shown as %q, want its name", o, got)
		}
		if got := o.Client("api_key", "acme-key-1"); got == "acme-key-1" {
			t.Errorf("%+v: API key shown raw", o)
		}
	}
	raw := Options{RawClient: true}
	if got := raw.Client("ip", "1.2.3.4"); got != "1.2.3.4" {
		t.Errorf("raw ip: %q", got)
	}
	if got := raw.Client("api_key", "secret-key"); got == "secret-key" || len(got) != 16 {
		t.Errorf("raw api key shown as %q, want a 16-character hash", got)
	}
	hashed := Options{IPv6Prefix: 64}
	if a, b := hashed.Client("ip", "2001:db8::1"), hashed.Client("ip", "2001:db8::2"); a != b {
		t.Errorf("two addresses of one /64 hash apart: %q %q", a, b)
	}
}
