package accesslog

import (
	"bytes"
	"testing"
	"time"
)

// TestRequestIDHostile: a request id a trusted proxy chose (quotes,
// backslashes, '=', a lone '-', a field name) and a user agent or referer
// that spells "request_id=…" round-trip through both formats: the id
// read back is the one written and no other field takes its place.
func TestRequestIDHostile(t *testing.T) {
	for _, f := range []Format{Combined, JSONL} {
		for _, id := range []string{`a" route=x "b`, `x\y`, "-", "%2D", `route=evil`, `a=b`, "{\"x\":1}", "abc\x00def", "é", "a b"} {
			var buf bytes.Buffer
			w, _ := NewWriter(&buf, Options{Format: f})
			e := Entry{Time: time.Unix(1, 0), Client: "c", Method: "GET", Path: "/p", Proto: "HTTP/1.1", Status: 200, Route: "api", Outcome: "forwarded", RequestID: id, UserAgent: "ua request_id=forged route=bad", Referer: `r request_id=forged2`}
			w.Log(&e)
			w.Close()
			p := NewParser(bytes.NewReader(buf.Bytes()), Auto)
			if !p.Next() {
				t.Errorf("%v %q: not parsed: %v %v\n%s", f, id, p.Err(), p.Malformed(), buf.String())
				continue
			}
			g := p.Entry()
			if g.RequestID != id || g.Route != "api" || g.UserAgent != e.UserAgent {
				t.Errorf("%v %q: got id %q route %q ua %q\n%s", f, id, g.RequestID, g.Route, g.UserAgent, buf.String())
			}
		}
	}
}
