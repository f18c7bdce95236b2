package adaptive

import "strings"

// Priority is the class of a request when an adaptive limit is reached:
// sheddable requests are refused first, then normal ones; critical ones
// may use the share of the limit kept for them (Config.Reserve).
type Priority uint8

// The priority classes, most important first. The zero value is Critical
// so that an array indexed by Priority reads in the order requests are
// served from the waiting room.
const (
	Critical Priority = iota
	Normal
	Sheddable
	// Priorities is the number of classes.
	Priorities
)

var priorityNames = [Priorities]string{"critical", "normal", "sheddable"}

// String returns the class's name, e.g. "sheddable".
func (p Priority) String() string {
	if p < Priorities {
		return priorityNames[p]
	}
	return "normal"
}

// ParsePriority reads a class's name, ignoring ASCII case and surrounding
// blanks. ok is false for anything else, which callers treat as Normal.
func ParsePriority(s string) (p Priority, ok bool) {
	// The common spellings without allocating: a header value arrives on
	// every request.
	switch s {
	case "critical":
		return Critical, true
	case "normal":
		return Normal, true
	case "sheddable":
		return Sheddable, true
	}
	if len(s) > 16 {
		return Normal, false
	}
	s = strings.ToLower(strings.TrimSpace(s))
	for i, n := range priorityNames {
		if s == n {
			return Priority(i), true
		}
	}
	return Normal, false
}
