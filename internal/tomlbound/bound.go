// Package tomlbound refuses a TOML document whose shape would make the
// decoders that read it spend time or memory out of proportion to its
// size, before any of them sees it.
//
// go-toml parses nested arrays and inline tables by recursion (a 1 MiB
// document of brackets takes half a gigabyte of stack), and viper, which
// reads the configuration, looks every key up by each prefix of its path
// (time growing with the cube of the nesting depth). Check walks the
// document once, without recursion, and bounds the nesting depth and the
// number of entries; what it admits, both decoders handle in time and
// memory linear in the document's size.
package tomlbound

import (
	"errors"

	"github.com/pelletier/go-toml/v2"
)

// Default bounds: far beyond any configuration, consumer registry or cases
// file Tollgate reads (the deepest real value, a cases file's expected
// header, lies 7 levels down), and small enough that a hostile 1 MiB
// document decodes in milliseconds.
const (
	// MaxDepth is the deepest nesting admitted. A value's depth is the
	// number of keys and array indexes on its path from the document's
	// root: `a = 1` is 1, `[[a]]` then `b.c = [1]` is 5 (a, its element,
	// b, c, the list's element).
	MaxDepth = 16
	// MaxEntries bounds the key/value pairs, tables (headers and the
	// parts of dotted keys) and array elements of one document.
	MaxEntries = 50_000
	// MaxCompares bounds the key comparisons of go-toml's duplicate-key
	// check, which compares each key with the siblings before it: a
	// table of 4,000 keys takes 8 million, a few tens of milliseconds.
	MaxCompares = 10_000_000
)

// Limits are the bounds Check enforces; a zero field takes its default.
type Limits struct {
	// Depth is the deepest nesting admitted (default MaxDepth).
	Depth int
	// Entries bounds the key/value pairs, table headers and array
	// elements (default MaxEntries).
	Entries int
	// Compares bounds the duplicate-key comparisons (default
	// MaxCompares).
	Compares int
}

func (l Limits) withDefaults() Limits {
	if l.Depth <= 0 {
		l.Depth = MaxDepth
	}
	if l.Entries <= 0 {
		l.Entries = MaxEntries
	}
	if l.Compares <= 0 {
		l.Compares = MaxCompares
	}
	return l
}

// ErrLimit is the error a document over a bound wraps.
var ErrLimit = errors.New("over a bound")

// LimitError is a document refused for its shape: where the bound was
// passed and which.
type LimitError struct {
	// Line and Column (1-based, in bytes) locate the entry that passed
	// the bound.
	Line, Column int
	// Msg names the bound, e.g. "nested deeper than 16 levels".
	Msg string
}

// Error returns the message; Position says where, as for go-toml's
// DecodeError.
func (e *LimitError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Position returns the line and column, as go-toml's DecodeError does.
func (e *LimitError) Position() (int, int) { return e.Line, e.Column }

// Check returns nil when data is within lim (zero: the defaults), a
// *LimitError when it is not, and a syntax error when it is not TOML the
// walk can follow: go-toml's own *toml.DecodeError when go-toml agrees
// (it is shown only the part of data the walk admitted), else a
// *SyntaxError of the walk's own.
func Check(data []byte, lim Limits) error {
	s := scanner{data: data, lim: lim.withDefaults()}
	err := s.document()
	var se *syntaxError
	if !errors.As(err, &se) {
		return err
	}
	// The walk stopped on something it does not read as TOML. go-toml
	// names the problem better; it is shown only what the walk admitted
	// and the byte that stopped it, so no more than one level deeper.
	end := min(se.off+1, len(data))
	var m map[string]any
	if terr := toml.Unmarshal(data[:end], &m); terr != nil {
		return terr
	}
	line, col := position(data, se.off)
	return &SyntaxError{Line: line, Column: col, Msg: se.msg}
}

// SyntaxError is TOML the walk could not follow and go-toml, shown the
// same lines, did not refuse.
type SyntaxError struct {
	// Line and Column (1-based, in bytes) locate the problem.
	Line, Column int
	// Msg says what was expected.
	Msg string
}

// Error returns the message; Position says where.
func (e *SyntaxError) Error() string { return e.Msg }

// Position returns the line and column.
func (e *SyntaxError) Position() (int, int) { return e.Line, e.Column }

// syntaxError is the walk's own stop, at a byte offset.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

// position returns the 1-based line and column of the byte offset off.
func position(data []byte, off int) (int, int) {
	line, start := 1, 0
	for i := 0; i < off && i < len(data); i++ {
		if data[i] == '\n' {
			line++
			start = i + 1
		}
	}
	return line, off - start + 1
}
