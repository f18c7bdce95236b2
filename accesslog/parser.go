package accesslog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes is the longest line Parser reads; longer lines are reported
// as malformed and skipped.
const MaxLineBytes = 64 << 10

// MaxReported is how many malformed lines Parser keeps for Malformed; it
// counts all of them.
const MaxReported = 100

// maxInterned bounds the parser's table of repeated short values.
const maxInterned = 4096

// LineError is one malformed line.
type LineError struct {
	// Line is the 1-based line number.
	Line int
	// Err says what is wrong with it.
	Err error
}

// Error implements error.
func (e LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Parser reads access log lines one at a time, like bufio.Scanner:
//
//	p := accesslog.NewParser(r, accesslog.Auto)
//	for p.Next() {
//		e := p.Entry()
//		...
//	}
//	if err := p.Err(); err != nil { ... }          // reading failed
//	for _, le := range p.Malformed() { ... }       // lines skipped
//
// A malformed line is recorded with its line number and skipped; parsing
// goes on. Blank lines are skipped silently. A Parser is not safe for
// concurrent use.
type Parser struct {
	// OnMalformed, when set, is called for every malformed line as it is
	// skipped (including those past MaxReported).
	OnMalformed func(LineError)

	r         *bufio.Reader
	format    Format
	line      int
	e         Entry
	err       error
	malformed []LineError
	nBad      int
	intern    map[string]string
	js        jsonEntry
}

// NewParser returns a Parser of r in format f (Auto detects it per line).
func NewParser(r io.Reader, f Format) *Parser {
	return &Parser{r: bufio.NewReaderSize(r, MaxLineBytes), format: f, intern: make(map[string]string)}
}

// Next reads the next well-formed entry. It returns false at the end of the
// input or on a read error (see Err).
func (p *Parser) Next() bool {
	for p.err == nil {
		line, err := p.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			p.line++
			p.bad(errors.New("line too long"))
			for err == bufio.ErrBufferFull {
				_, err = p.r.ReadSlice('\n')
			}
			if err != nil && err != io.EOF {
				p.err = err
			}
			if err == io.EOF {
				return false
			}
			continue
		}
		if err != nil && err != io.EOF {
			p.err = err
			return false
		}
		if len(line) == 0 && err == io.EOF {
			return false
		}
		p.line++
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) != 0 {
			if perr := p.parse(line); perr != nil {
				p.bad(perr)
			} else {
				return true
			}
		}
		if err == io.EOF {
			return false
		}
	}
	return false
}

func (p *Parser) bad(err error) {
	le := LineError{Line: p.line, Err: err}
	p.nBad++
	if len(p.malformed) < MaxReported {
		p.malformed = append(p.malformed, le)
	}
	if p.OnMalformed != nil {
		p.OnMalformed(le)
	}
}

// Entry returns the entry read by the last successful Next. It is
// overwritten by the next call; copy it to keep it.
func (p *Parser) Entry() *Entry { return &p.e }

// Line returns the line number of the last line read.
func (p *Parser) Line() int { return p.line }

// Err returns the read error that stopped the parser, nil at a clean end.
func (p *Parser) Err() error { return p.err }

// Malformed returns the first MaxReported malformed lines.
func (p *Parser) Malformed() []LineError { return p.malformed }

// MalformedCount returns the number of malformed lines so far.
func (p *Parser) MalformedCount() int { return p.nBad }

func (p *Parser) parse(line []byte) error {
	f := p.format
	if f == Auto {
		f = Combined
		if line[0] == '{' {
			f = JSONL
		}
	}
	p.e = Entry{Bytes: -1}
	var err error
	if f == JSONL {
		err = p.parseJSON(line)
	} else {
		err = p.parseCombined(line)
	}
	if err != nil {
		return err
	}
	return p.check()
}

func (p *Parser) check() error {
	e := &p.e
	switch {
	case e.Method == "":
		return errors.New("missing method")
	case e.Status < 100 || e.Status > 999:
		return fmt.Errorf("status %d out of range", e.Status)
	case e.Time.IsZero():
		return errors.New("missing time")
	}
	return nil
}
