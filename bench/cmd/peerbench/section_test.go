package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReplaceSection: the generated block is added to a new file, under
// its heading, or at the end, and replaced between its markers with the
// text around it kept; a begin marker without its end is an error.
func TestReplaceSection(t *testing.T) {
	const h, b, e = "## H", "<!-- b -->", "<!-- e -->"
	tests := []struct {
		name, old, want string
	}{
		{"new file", "", "## H\n\n<!-- b -->\n\nnew\n<!-- e -->\n"},
		{"at the end", "# Doc\ntext\n\n", "# Doc\ntext\n\n## H\n\n<!-- b -->\n\nnew\n<!-- e -->\n"},
		{"under the heading", "# Doc\n## H\nkept\n", "# Doc\n## H\n\n<!-- b -->\n\nnew\n<!-- e -->\nkept\n"},
		{"between the markers", "## H\nbefore\n<!-- b -->\n\nold\n<!-- e -->\nafter\n", "## H\nbefore\n<!-- b -->\n\nnew\n<!-- e -->\nafter\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "B.md")
			if tt.old != "" {
				if err := os.WriteFile(path, []byte(tt.old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := replaceSection(path, h, b, e, "new"); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(path); string(got) != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "B.md")
	if err := os.WriteFile(path, []byte("<!-- b -->\nno end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceSection(path, h, b, e, "new"); err == nil {
		t.Error("a begin marker without its end was accepted")
	}
}
