package e2e

import (
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The README is the entry point and the guides in docs/ hold most of the
// prose, so the documents link to each other by relative paths and section
// anchors. A section that moves or is renamed breaks those links silently;
// these tests make it fail instead.

// TestReadmeStartsWithCommands: the README's first lines are the two
// commands a newcomer needs, running the gateway on the shipped
// configuration and running every test, before anything else.
func TestReadmeStartsWithCommands(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(b), "\n", 7)
	if len(lines) < 6 || lines[0] != "# Tollgate" || lines[2] != "```sh" ||
		!strings.HasPrefix(lines[3], "go run ./cmd/gateway --config gateway.toml ") ||
		!strings.HasPrefix(lines[4], "./test.sh ") || lines[5] != "```" {
		t.Errorf("README.md does not open with the title and the two commands (run the gateway on gateway.toml, ./test.sh); its first lines:\n%s",
			strings.Join(lines[:min(len(lines), 6)], "\n"))
	}
}

// TestDocLinksResolve: every relative link in the repository's Markdown
// files names a file or directory that exists, and a link with a fragment
// into a Markdown file names one of its headings (as GitHub spells the
// anchor). Links inside code are not links and are skipped, as are links
// with a scheme (https:, mailto:).
func TestDocLinksResolve(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			docs = append(docs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 3 {
		t.Fatalf("found only %d Markdown files under %s", len(docs), root)
	}
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) map[string]bool {
		if a, ok := anchorsOf[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchorsOf[path] = a
		return a
	}
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, target := range markdownLinks(string(b)) {
			u, err := url.Parse(target)
			if err != nil || u.Scheme != "" || u.Host != "" {
				continue
			}
			checked++
			dest := doc
			if u.Path != "" {
				dest = filepath.Join(filepath.Dir(doc), filepath.FromSlash(u.Path))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: no such file or directory", rel, target)
					continue
				}
			}
			if u.Fragment != "" && strings.HasSuffix(dest, ".md") && !anchors(dest)[u.Fragment] {
				t.Errorf("%s: link %q: no heading with that anchor in %s", rel, target, filepath.Base(dest))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the link parser is broken")
	}
}

var (
	// fencedCode is a fenced code block (``` or ~~~, three or more).
	fencedCode = regexp.MustCompile("(?ms)^[ \t]*(```+|~~~+).*?^[ \t]*(```+|~~~+)[ \t]*$")
	// inlineCode is a code span on one line.
	inlineCode = regexp.MustCompile("`+[^`\n]*`+")
	// linkTarget is the destination of an inline link or image; the link
	// text may span lines, the destination does not.
	linkTarget = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// headingLine is an ATX heading.
	headingLine = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	// linkMarkup is a link inside a heading: its text is the anchor's.
	linkMarkup = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	// htmlAnchor is an explicit anchor (<a id="x"> or name="x").
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// markdownLinks returns the destinations of the inline links and images of
// a Markdown document, outside code blocks and code spans.
func markdownLinks(doc string) []string {
	doc = fencedCode.ReplaceAllString(doc, "")
	doc = inlineCode.ReplaceAllString(doc, "")
	var out []string
	for _, m := range linkTarget.FindAllStringSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	return out
}

// headingAnchors returns the anchors GitHub gives a document's headings:
// the heading's text in lower case, without punctuation other than '-'
// and '_', spaces turned into '-', and "-1", "-2"… after repeats.
func headingAnchors(doc string) map[string]bool {
	doc = fencedCode.ReplaceAllString(doc, "")
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(doc, "\n") {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := linkMarkup.ReplaceAllString(m[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}
