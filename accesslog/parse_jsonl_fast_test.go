package accesslog

import (
	"bytes"
	"encoding/json"
	"testing"
)

// BenchmarkJSONLine decodes the same Writer-made jsonl lines with the
// hand-written fast path (what the Parser does) and with encoding/json
// alone; the fast path stays only while it pays (see BENCHMARKS.md).
func BenchmarkJSONLine(b *testing.B) {
	lines := bytes.SplitAfter(benchLog(b, JSONL, 1000), []byte("\n"))
	lines = lines[:len(lines)-1]
	for i := range lines {
		lines[i] = bytes.TrimRight(lines[i], "\n")
	}
	decoders := []struct {
		name   string
		decode func(p *Parser, line []byte) error
	}{
		{"fast", func(p *Parser, line []byte) error { return p.parseJSON(line) }},
		{"encoding_json", func(p *Parser, line []byte) error {
			p.js = jsonEntry{}
			if err := json.Unmarshal(line, &p.js); err != nil {
				return err
			}
			return p.fromJSON()
		}},
	}
	for _, d := range decoders {
		b.Run(d.name, func(b *testing.B) {
			p := NewParser(nil, JSONL)
			b.SetBytes(int64(len(lines[0])))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := d.decode(p, lines[i%len(lines)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestJSONFastMatchesEncodingJSON: for every line the fast path accepts,
// it decodes what encoding/json decodes.
func TestJSONFastMatchesEncodingJSON(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Options{Format: JSONL, RawClient: true})
	for _, e := range sample() {
		w.Log(&e)
	}
	w.Close()
	lines := bytes.Split(bytes.TrimRight(buf.Bytes(), "\n"), []byte("\n"))
	lines = append(lines, []byte(`{"time":"2025-03-14T15:09:26Z","method":"GET","status":200,"latency":1e-3,"bytes":0}`),
		[]byte(` { "time" : "2025-03-14T15:09:26Z" , "path":"\u00e9\n" } `))
	for _, line := range lines {
		p := NewParser(nil, JSONL)
		fast := p.fastJSON(line)
		got := p.js
		var want jsonEntry
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if !fast {
			continue
		}
		if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
			t.Errorf("%s:\nfast          %s\nencoding/json %s", line, g, w)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
