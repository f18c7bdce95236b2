package costscan

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func mustPath(t testing.TB, s string) *Path {
	t.Helper()
	p, err := ParsePath(s)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

// scanChunks writes body in chunks of size n (every split is a chunk
// boundary somewhere) and returns the result.
func scanChunks(p *Path, sse bool, limit int64, body []byte, n int) (Result, int64) {
	var s Scanner
	s.Reset(p, sse, limit)
	for len(body) > 0 {
		k := min(n, len(body))
		s.Write(body[:k])
		body = body[k:]
	}
	return s.Result()
}

// oracle walks the document with encoding/json (the last of repeated
// keys wins, as there): the value at path as the scanner must report it.
func oracle(path string, body []byte) (Result, int64) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return None, 0
	}
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0 {
		return None, 0 // trailing data
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return None, 0
		}
		if v, ok = m[k]; !ok {
			return None, 0
		}
	}
	n, ok := v.(json.Number)
	if !ok {
		return Invalid, 0
	}
	s := n.String()
	if strings.ContainsAny(s, ".eE-") || len(s) > 16 {
		return Invalid, 0
	}
	x, err := strconv.ParseInt(s, 10, 64)
	if err != nil || x > MaxValue {
		return Invalid, 0
	}
	return Valid, x
}

// oracleDiffers are the table's cases where encoding/json reads
// otherwise by design: it unescapes keys, nests deeper and rejects a
// number's spelling that the scanner (checking structure) reads as a
// number that is not an integer.
var oracleDiffers = map[string]bool{"escaped key": true, "too deep": true, "leading zero": true}

func TestJSONTable(t *testing.T) {
	cases := []struct {
		name, body string
		want       Result
		val        int64
	}{
		{"plain", `{"id":"x","usage":{"prompt_tokens":3,"total_tokens":42}}`, Valid, 42},
		{"whitespace", " {\n \"usage\" : { \"total_tokens\" :\t7 } }\r\n", Valid, 7},
		{"zero", `{"usage":{"total_tokens":0}}`, Valid, 0},
		{"max", `{"usage":{"total_tokens":9007199254740992}}`, Valid, MaxValue},
		{"above max", `{"usage":{"total_tokens":9007199254740993}}`, Invalid, 0},
		{"huge", `{"usage":{"total_tokens":123456789012345678901234567890}}`, Invalid, 0},
		{"negative", `{"usage":{"total_tokens":-5}}`, Invalid, 0},
		{"float", `{"usage":{"total_tokens":5.0}}`, Invalid, 0},
		{"exponent", `{"usage":{"total_tokens":5e3}}`, Invalid, 0},
		{"leading zero", `{"usage":{"total_tokens":05}}`, Invalid, 0},
		{"string", `{"usage":{"total_tokens":"42"}}`, Invalid, 0},
		{"object", `{"usage":{"total_tokens":{"n":42}}}`, Invalid, 0},
		{"array", `{"usage":{"total_tokens":[42]}}`, Invalid, 0},
		{"null", `{"usage":{"total_tokens":null}}`, Invalid, 0},
		{"true", `{"usage":{"total_tokens":true}}`, Invalid, 0},
		{"missing", `{"usage":{"prompt_tokens":3}}`, None, 0},
		{"wrong level", `{"total_tokens":9,"x":{"usage":{"total_tokens":1}}}`, None, 0},
		{"inside array", `{"usage":[{"total_tokens":1}]}`, None, 0},
		{"repeated last wins", `{"usage":{"total_tokens":1},"usage":{"total_tokens":2}}`, Valid, 2},
		{"repeated inner", `{"usage":{"total_tokens":1,"total_tokens":9}}`, Valid, 9},
		{"repeated then invalid", `{"usage":{"total_tokens":1},"usage":{"total_tokens":"x"}}`, Invalid, 0},
		{"repeated usage without tokens", `{"usage":{"total_tokens":1},"usage":{}}`, None, 0},
		{"key in string", `{"text":"\"usage\":{\"total_tokens\":5}","usage":{"total_tokens":6}}`, Valid, 6},
		{"escaped key", `{"usage":{"total\u005ftokens":5}}`, None, 0},
		{"escaped backslash before quote", `{"a":"x\\","usage":{"total_tokens":3}}`, Valid, 3},
		{"trailing garbage", `{"usage":{"total_tokens":3}} x`, None, 0},
		{"two documents", `{"usage":{"total_tokens":3}}{}`, None, 0},
		{"cut short", `{"usage":{"total_tokens":3}`, None, 0},
		{"trailing comma", `{"usage":{"total_tokens":3},}`, None, 0},
		{"missing colon", `{"usage" {"total_tokens":3}}`, None, 0},
		{"mismatched close", `{"usage":{"total_tokens":3]}`, None, 0},
		{"not json", `hello`, None, 0},
		{"empty", ``, None, 0},
		{"root number", `42`, None, 0},
		{"deep unrelated", `{"a":` + strings.Repeat("[", 400) + strings.Repeat("]", 400) + `,"usage":{"total_tokens":8}}`, Valid, 8},
		{"too deep", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), None, 0},
	}
	p := mustPath(t, "usage.total_tokens")
	for _, c := range cases {
		for _, n := range []int{1, 2, 3, 7, 1 << 20} {
			r, v := scanChunks(p, false, 0, []byte(c.body), n)
			if r != c.want || v != c.val {
				t.Errorf("%s (chunks of %d): got %s %d, want %s %d", c.name, n, r, v, c.want, c.val)
			}
		}
		if o, ov := oracle("usage.total_tokens", []byte(c.body)); !oracleDiffers[c.name] && (o != c.want || ov != c.val) {
			t.Errorf("%s: the table says %s %d, encoding/json %s %d", c.name, c.want, c.val, o, ov)
		}
	}
}

func TestSSE(t *testing.T) {
	chunk := `data: {"id":"c","choices":[{"delta":{"content":"hi"}}],"usage":null}` + "\n\n"
	final := `data: {"id":"c","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}` + "\n\n"
	done := "data: [DONE]\n\n"
	cases := []struct {
		name, body string
		want       Result
		val        int64
	}{
		{"openai", chunk + chunk + final + done, Valid, 12},
		{"crlf", strings.ReplaceAll(chunk+final+done, "\n", "\r\n"), Valid, 12},
		{"no usage", chunk + chunk + done, None, 0},
		{"last of two", strings.Replace(final, "12", "3", 1) + final, Valid, 12},
		{"later invalid", final + strings.Replace(final, "12", "-1", 1), Invalid, 0},
		{"not dispatched", chunk + strings.TrimSuffix(final, "\n"), None, 0},
		{"multi-line data", "data: {\"usage\":\ndata: {\"total_tokens\":4}}\n\n", Valid, 4},
		{"comment and fields", ": ping\nevent: x\nid: 1\n" + final, Valid, 12},
		{"no space", `data:{"usage":{"total_tokens":9}}` + "\n\n", Valid, 9},
		{"field named datum", `datum: {"usage":{"total_tokens":9}}` + "\n\n", None, 0},
		{"bad json event", `data: {"usage":{"total_tokens":9}` + "\n\n", None, 0},
		{"usage then broken event", final + `data: {"usage":{"total_tokens":9` + "\n\n", Valid, 12},
		// A line past the bound is part of its event, which is then not
		// read; it is not a blank line (it ends no event).
		{"usage line then an over-long line", `data: {"usage":{"total_tokens":9}}` + "\ndata: " + strings.Repeat("x", MaxEventBytes+64) + "\n\n", None, 0},
		{"over-long line then usage line", "data: " + strings.Repeat("x", MaxEventBytes+64) + "\n" + `data: {"usage":{"total_tokens":9}}` + "\n\n", None, 0},
		{"over-long comment, then usage", ": " + strings.Repeat("x", MaxEventBytes+64) + "\n\n" + final, Valid, 12},
	}
	p := mustPath(t, "usage.total_tokens")
	for _, c := range cases {
		for _, n := range []int{1, 5, 64, 1 << 20} {
			r, v := scanChunks(p, true, 0, []byte(c.body), n)
			if r != c.want || v != c.val {
				t.Errorf("%s (chunks of %d): got %s %d, want %s %d", c.name, n, r, v, c.want, c.val)
			}
		}
	}
}

func TestBound(t *testing.T) {
	p := mustPath(t, "usage.total_tokens")
	body := []byte(`{"usage":{"total_tokens":3}}`)
	if r, _ := scanChunks(p, false, int64(len(body)), body, 4); r != Valid {
		t.Errorf("a body of exactly the bound: %s, want valid", r)
	}
	if r, _ := scanChunks(p, false, int64(len(body)-1), body, 4); r != None {
		t.Errorf("a body past the bound: %s, want none", r)
	}
	// An event larger than MaxEventBytes is not read; the scanner keeps
	// no more than that of it.
	big := "data: {\"pad\":\"" + strings.Repeat("x", MaxEventBytes) + "\",\"usage\":{\"total_tokens\":5}}\n\n"
	var s Scanner
	s.Reset(p, true, 0)
	s.Write([]byte(big))
	if r, _ := s.Result(); r != None {
		t.Errorf("an oversized event: %s, want none", r)
	}
	if cap(s.ev) > MaxEventBytes+64 || cap(s.line) > 2*maxLineBytes {
		t.Errorf("buffers grew to %d and %d bytes", cap(s.ev), cap(s.line))
	}
}

func TestParsePath(t *testing.T) {
	for _, bad := range []string{"", ".", "a..b", "a.", `a"b`, `a\b`, "a b", strings.Repeat("k", MaxKeyBytes+1), "a.b.c.d.e.f.g.h.i"} {
		if _, err := ParsePath(bad); err == nil {
			t.Errorf("ParsePath(%q) accepted", bad)
		}
	}
	if p, err := ParsePath("usage.total_tokens"); err != nil || p.String() != "usage.total_tokens" {
		t.Errorf("ParsePath: %v %v", p, err)
	}
}

// FuzzJSON checks the scanner against encoding/json on any document
// that has no escaped keys, whatever the chunking.
func FuzzJSON(f *testing.F) {
	f.Add([]byte(`{"usage":{"total_tokens":42}}`), uint8(3))
	f.Add([]byte(`{"usage":{"total_tokens":1},"usage":{"total_tokens":2}}`), uint8(1))
	f.Add([]byte(`{"a":"\\\"","usage":{"total_tokens":-1}}`), uint8(2))
	f.Add([]byte(`[{"usage":{"total_tokens":4}}]`), uint8(5))
	p := mustPath(f, "usage.total_tokens")
	f.Fuzz(func(t *testing.T, body []byte, n uint8) {
		r, v := scanChunks(p, false, 0, body, int(n)+1)
		if bytes.IndexByte(body, '\\') >= 0 || bytes.Count(body, []byte("[")) > MaxDepth/2 {
			return // escaped keys differ from encoding/json by design
		}
		if o, ov := oracle("usage.total_tokens", body); o != r || ov != v {
			// The scanner checks structure, not every literal: it may
			// read a document encoding/json rejects, never the reverse.
			if o != None {
				t.Fatalf("%q: scanner %s %d, encoding/json %s %d", body, r, v, o, ov)
			}
		}
	})
}

func BenchmarkScan(b *testing.B) {
	p := mustPath(b, "usage.total_tokens")
	// Prose: an escaped newline every line, an escaped quotation every
	// few lines; dense: a quotation every 32 bytes (the worst case).
	prose := strings.Repeat(`The gateway counts the tokens an upstream reports, reading the answer as it passes.\n`+
		`A \"usage\" object at the end of the body carries the count, which the scanner finds.\n`, 1<<13)
	body := []byte(`{"choices":[{"message":{"content":"` + prose + `"}}],"usage":{"total_tokens":12}}`)
	dense := []byte(`{"choices":[{"message":{"content":"` + strings.Repeat(`Lorem ipsum \"dolor\" sit amet, `, 1<<15) + `"}}],"usage":{"total_tokens":12}}`)
	var ev strings.Builder
	for ev.Len() < len(body) {
		ev.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Lorem ipsum dolor"}}],"usage":null}` + "\n\n")
	}
	ev.WriteString(`data: {"choices":[],"usage":{"total_tokens":12}}` + "\n\ndata: [DONE]\n\n")
	sse := []byte(ev.String())
	for _, c := range []struct {
		name string
		sse  bool
		body []byte
	}{{"json", false, body}, {"dense", false, dense}, {"sse", true, sse}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			var s Scanner
			for b.Loop() {
				s.Reset(p, c.sse, 0)
				for off := 0; off < len(c.body); off += 32 << 10 {
					s.Write(c.body[off:min(off+32<<10, len(c.body))])
				}
				if r, v := s.Result(); r != Valid || v != 12 {
					b.Fatalf("got %s %d", r, v)
				}
			}
		})
	}
}

// TestResetKeepsLittle: a stream of large events (a line and an event
// near MaxEventBytes, split across writes) does not leave the Scanner,
// which a pooled request keeps, holding their buffers after Reset; small
// buffers are kept for reuse.
func TestResetKeepsLittle(t *testing.T) {
	p := mustPath(t, "usage.total_tokens")
	var s Scanner
	s.Reset(p, true, 0)
	big := []byte("data: {\"usage\":{\"total_tokens\":1},\"pad\":\"" + strings.Repeat("x", MaxEventBytes/2) + "\"}\n\n")
	for i := 0; i < len(big); i += 4096 {
		s.Write(big[i:min(i+4096, len(big))])
	}
	if r, v := s.Result(); r != Valid || v != 1 {
		t.Fatalf("got %s %d", r, v)
	}
	if cap(s.line) <= keepBytes && cap(s.ev) <= keepBytes {
		t.Fatal("the stream did not grow the buffers: the test tests nothing")
	}
	s.Reset(p, true, 0)
	if cap(s.line) > keepBytes || cap(s.ev) > keepBytes {
		t.Errorf("after Reset the Scanner keeps %d + %d bytes of buffers", cap(s.line), cap(s.ev))
	}
	s.Write([]byte("data: {\"usage\":{\"total_tokens\":2}}\n\n"))
	if r, v := s.Result(); r != Valid || v != 2 {
		t.Fatalf("after Reset: got %s %d", r, v)
	}
}
