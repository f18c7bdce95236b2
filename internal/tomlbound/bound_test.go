package tomlbound

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// treeDepth is the oracle: the depth of a decoded value, counted on the
// tree go-toml builds (one level a map key or array index on the path to
// the deepest value), independent of the text.
func treeDepth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			d = max(d, 1+treeDepth(x))
		}
	case []any:
		for _, x := range v {
			d = max(d, 1+treeDepth(x))
		}
	}
	return d
}

// treeSize counts the map entries and array elements of a decoded value.
func treeSize(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			n += 1 + treeSize(x)
		}
	case []any:
		for _, x := range v {
			n += 1 + treeSize(x)
		}
	}
	return n
}

// measure runs the walk without bounds and returns the depth and entry
// count it measured.
func measure(data []byte) (int, int, error) {
	s := scanner{data: data, lim: Limits{Depth: 1 << 30, Entries: 1 << 30, Compares: 1 << 62}}
	err := s.document()
	return s.deepest, s.entries, err
}

// TestDepthMatchesDecodedTree: for documents of every construct, the
// walk's depth is the depth of the tree go-toml decodes.
func TestDepthMatchesDecodedTree(t *testing.T) {
	for _, doc := range []string{
		``,
		`a = 1`,
		`a.b.c = 1`,
		`"a.b" = 1`,
		`a . "b" . 'c' = "x"`,
		`a = {}`,
		`a = []`,
		`a = [[]]`,
		`a = [[1]]`,
		`a = [1, [2, [3]], {b = {c = [4]}}]`,
		"a = [\n  1, # one\n  2,\n]\n",
		`a = { b.c = 1, d = { e = [ { f = 1 } ] } }`,
		"[a.b.c]\n",
		"[a]\nb.c = 1\n",
		"[[a]]\n",
		"[[a]]\nb = 1\n[[a]]\nc.d = [1]\n",
		"[[a]]\n[[a.b]]\n[[a.b.c]]\nd = 1\n",
		"[[a]]\n[a.b]\nc = 1\n",
		"[x]\n[[x.a]]\n[[x.a.b]]\n[x.a.b.c]\n",
		"[[\"a\"]]\n[\"\\u0061\".b]\nc = 1\n",
		"s = \"\"\"\n[[[ not an array {{\n\"\"\"\nt = '''x''''\n",
		"s = \"a\\\"[\"\nt = 'b\\'\n",
		"d = 1979-05-27 07:32:00 # a local date-time\ne = [1979-05-27 07:32:00, 1]\n",
		"a = 1\r\nb = [\r\n 2\r\n]\r\n",
		"# only a comment\n\n",
		`a = [{b = 1}, {c = [{d = 2}]}]`,
	} {
		var m map[string]any
		if err := toml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%q: go-toml refuses the document: %v", doc, err)
		}
		d, _, err := measure([]byte(doc))
		if err != nil {
			t.Errorf("%q: walk: %v", doc, err)
			continue
		}
		if want := treeDepth(m); d != want {
			t.Errorf("%q: depth %d, want %d (the decoded tree's)", doc, d, want)
		}
		if err := Check([]byte(doc), Limits{}); err != nil {
			t.Errorf("%q: Check: %v", doc, err)
		}
	}
}

// TestHostileShapes: every shape that makes a decoder work out of
// proportion to its size is refused by a bound, naming it and where.
func TestHostileShapes(t *testing.T) {
	const n = 100_000
	for _, tc := range []struct {
		name, doc string
		want      string
	}{
		{"nested arrays", "a = " + strings.Repeat("[", n) + strings.Repeat("]", n), "line 1, column 21: nested deeper than 16 levels"},
		{"nested inline tables", "a = " + strings.Repeat("{b=", n) + "1" + strings.Repeat("}", n), "nested deeper than 16 levels"},
		{"dotted key", "a" + strings.Repeat(".a", n) + " = 1", "nested deeper than 16 levels"},
		{"table header", "[a" + strings.Repeat(".a", n) + "]", "nested deeper than 16 levels"},
		{"arrays of tables", strings.Repeat("[[a]]\n", n+1), "more than 50000 entries"},
		{"nested arrays of tables", "[[a]]\n[[a.a]]\n[[a.a.a]]\n[[a.a.a.a]]\n[[a.a.a.a.a]]\n[[a.a.a.a.a.a]]\n[[a.a.a.a.a.a.a]]\n[[a.a.a.a.a.a.a.a]]\n[[a.a.a.a.a.a.a.a.a]]\n",
			"line 9, column 1: nested deeper than 16 levels"},
		{"many keys", manyKeys("k%d = 1\n", n), "line 4473, column 1: too many keys in one table"},
		{"many tables", manyKeys("[t%d]\n", n), "too many keys in one table"},
		{"many keys in a table", "[a]\n" + manyKeys("k%d = 1\n", n), "too many keys in one table"},
		{"many keys in an inline table", "a = {" + manyKeys("k%d = 1, ", n) + "}", "too many keys in one table"},
		{"many dotted keys", manyKeys("a.k%d = 1\n", n), "too many keys in one table"},
		{"long array", "a = [" + strings.Repeat("1,", n+1) + "]", "more than 50000 entries"},
		{"arrays in inline tables", "a = " + strings.Repeat("{b=[", n) + strings.Repeat("]}", n), "nested deeper than 16 levels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.doc), Limits{})
			var le *LimitError
			if !errors.As(err, &le) || !strings.Contains(fmt.Sprintf("line %d, column %d: %s", le.Line, le.Column, err), tc.want) {
				t.Fatalf("Check = %v, want a limit error containing %q", err, tc.want)
			}
		})
	}
}

// manyKeys returns format filled with 0..n-1.
func manyKeys(format string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, format, i)
	}
	return b.String()
}

// TestLargeRealShapesPass: what a large deployment writes is within the
// bounds: 20,000 consumers, 4,000 routes with their limits, a table of
// 2,000 keys. (A registry's entry bound is its own, larger one.)
func TestLargeRealShapesPass(t *testing.T) {
	for name, doc := range map[string]string{
		"consumers": manyKeys("[[consumers]]\nname = \"c%[1]d\"\nplan = \"gold\"\napi_keys_sha256 = [\"%064[1]x\"]\nrates = { search = [\"10/s\"] }\n", 20_000),
		"routes": manyKeys("[[routes]]\nname = \"r%[1]d\"\npath_prefix = \"/r%[1]d\"\nupstream = \"http://u\"\nlimits = [\"a\", \"b\"]\n"+
			"respond = { status = 200, headers = { \"X-A\" = \"1\" } }\n", 4_000),
		"wide table": "[a]\n" + manyKeys("k%d = 1\n", 2_000),
	} {
		lim := Limits{}
		if name == "consumers" {
			lim.Entries = 5_000_000
		}
		if err := Check([]byte(doc), lim); err != nil {
			t.Errorf("%s (%d bytes): %v", name, len(doc), err)
		}
	}
}

// TestSyntaxErrorsAreGoTOMLs: a document the walk cannot follow gets
// go-toml's own error, located as go-toml locates it. (The walk is no
// validator: `a = [1 2]` passes it, to be refused by the decoder.)
func TestSyntaxErrorsAreGoTOMLs(t *testing.T) {
	for _, doc := range []string{
		"[[routes]\n",
		"a = \n",
		"a = \"unterminated\n",
		"= 1\n",
		"a = [" + strings.Repeat("[", 10) + "1 = \n",
		"[a\n",
		"[[a]\n",
		"a.=1\n",
	} {
		err := Check([]byte(doc), Limits{})
		var de *toml.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%q: Check = %v (%T), want go-toml's DecodeError", doc, err, err)
		}
	}
}

// FuzzCheck: whatever the input, Check never panics; on a document
// go-toml accepts it reports no syntax error, its depth is never less
// than that of the decoded tree, and the tree holds no more than its
// entries times their depth; what it admits is within its bounds.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{
		"a = 1",
		"a = [[1], {b = [2]}]",
		"[[a]]\n[[a.b]]\nc.d = 1\n",
		"[a.b]\n[[a.c]]\n",
		"s = '''x'''\nt = \"\"\"y\\\"\"\"\"\n",
		"a = { b = { c = { d = { e = 1 } } } }",
		"[\"a\".'b']\nc = 1979-05-27 07:32:00\n",
		"a = [\n # c\n 1,\n]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{Depth: 4, Entries: 20, Compares: 50}
		err := Check(data, lim)
		var m map[string]any
		if toml.Unmarshal(data, &m) != nil {
			return
		}
		if err != nil && !errors.Is(err, ErrLimit) {
			t.Fatalf("go-toml accepts %q, Check refuses it: %v", data, err)
		}
		d, n, werr := measure(data)
		if werr != nil {
			t.Fatalf("go-toml accepts %q, the walk stops: %v", data, werr)
		}
		td := treeDepth(m)
		if d < td {
			t.Fatalf("%q: walk depth %d < decoded depth %d", data, d, td)
		}
		if ts := treeSize(m); ts > n*max(d, 1) {
			t.Fatalf("%q: decoded tree of %d nodes, more than %d entries × depth %d", data, ts, n, d)
		}
		if err == nil && (td > lim.Depth || d > lim.Depth || n > lim.Entries) {
			t.Fatalf("%q: admitted at depth %d (decoded %d), %d entries, over %+v", data, d, td, n, lim)
		}
	})
}
