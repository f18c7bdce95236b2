package main

import (
	"fmt"
	"os"
	"strings"
)

// replaceSection replaces the text between begin and end in path with md,
// keeping everything outside the markers. Without the markers the block
// goes under heading, or with the heading at the end of the file (which
// is created when absent).
func replaceSection(path, heading, begin, end, md string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	text := string(old)
	block := begin + "\n\n" + md + "\n" + end
	if i := strings.Index(text, begin); i >= 0 {
		j := strings.Index(text[i:], end)
		if j < 0 {
			return fmt.Errorf("%s: %q without %q", path, begin, end)
		}
		text = text[:i] + block + text[i+j+len(end):]
	} else if i := strings.Index(text, heading+"\n"); i >= 0 {
		at := i + len(heading) + 1
		text = text[:at] + "\n" + block + "\n" + text[at:]
	} else {
		if text = strings.TrimRight(text, "\n"); text != "" {
			text += "\n\n"
		}
		text += heading + "\n\n" + block + "\n"
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
