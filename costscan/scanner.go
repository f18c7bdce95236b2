package costscan

import "bytes"

// MaxEventBytes bounds the data of one server-sent event that is read
// for the path: an event with more data is passed on but not read.
const MaxEventBytes = 1 << 20

// maxLineBytes bounds the part of a line kept across chunks (an event's
// field name and its data); a longer line is not read.
const maxLineBytes = MaxEventBytes + 16

// Scanner finds the value at a path in a body written to it piece by
// piece: a JSON document, or a text/event-stream whose events' data are
// JSON documents (the value is then the one of the last event that
// carries the path: streams send their usage in a final event). It never
// holds more than one event's data (MaxEventBytes) and one line's
// unfinished part, and stops reading past its bound. A Scanner is not
// safe for concurrent use; the zero value is unused: call Reset.
type Scanner struct {
	path  *Path
	sse   bool
	limit int64
	n     int64
	over  bool
	d     doc

	// The stream's unfinished line (from the previous chunks) and the
	// current event's data.
	line     []byte
	lineOver bool
	ev       []byte
	evOver   bool
	evKey    bool // the event's data contains the path's last key
	evData   bool // the event has a data field
	found    Result
	val      int64
}

// keepBytes bounds the buffer memory Reset keeps from a previous body:
// a Scanner lives in a pooled request, and one stream of large events
// must not leave every pooled request holding a megabyte or two.
const keepBytes = 64 << 10

// Reset readies s for a new body: a JSON document (sse false) or an
// event stream, read at path for at most limit bytes (0: no bound). The
// memory of a previous body's buffers is kept up to keepBytes each.
func (s *Scanner) Reset(path *Path, sse bool, limit int64) {
	line, ev := s.line[:0], s.ev[:0]
	if cap(line) > keepBytes {
		line = nil
	}
	if cap(ev) > keepBytes {
		ev = nil
	}
	*s = Scanner{path: path, sse: sse, limit: limit, line: line, ev: ev}
	s.d.reset(path)
}

// Write implements io.Writer: it reads p (never keeping it) and always
// reports it written.
func (s *Scanner) Write(p []byte) (int, error) {
	if s.over || s.path == nil {
		return len(p), nil
	}
	s.n += int64(len(p))
	if s.limit > 0 && s.n > s.limit {
		// Past the bound: the body has no value, whatever was read.
		s.over = true
		s.line, s.ev = s.line[:0], s.ev[:0]
		return len(p), nil
	}
	if s.sse {
		s.writeSSE(p)
	} else {
		s.d.write(p)
	}
	return len(p), nil
}

// Result reports the value found in the body written so far, read as
// complete: for a JSON document, the last value at the path once the
// document is complete (None if it is not, or if it was not JSON); for
// an event stream, the value of the last dispatched event that carries
// the path (an event not ended by a blank line is not dispatched); None
// past the bound.
func (s *Scanner) Result() (Result, int64) {
	if s.over || s.path == nil {
		return None, 0
	}
	if s.sse {
		return s.found, s.val
	}
	return s.d.finish()
}

// Scanned returns the bytes written so far.
func (s *Scanner) Scanned() int64 { return s.n }

// writeSSE splits p into lines; a line's unfinished end is kept for the
// next chunk.
func (s *Scanner) writeSSE(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.keepLine(p)
			return
		}
		ln := p[:i]
		p = p[i+1:]
		if len(s.line) > 0 || s.lineOver {
			s.keepLine(ln)
			ln = s.line
		}
		if !s.lineOver {
			s.sseLine(ln)
		} else {
			// A line past the bound is not blank (it ends no event);
			// the event it belongs to, which it may have been data of,
			// is not read.
			s.evOver = true
		}
		s.line, s.lineOver = s.line[:0], false
	}
}

func (s *Scanner) keepLine(b []byte) {
	if s.lineOver {
		return
	}
	if len(s.line)+len(b) > maxLineBytes {
		s.lineOver, s.line = true, s.line[:0]
		return
	}
	s.line = append(s.line, b...)
}

var dataField = []byte("data")

// sseLine handles one line of the stream (without its '\n').
func (s *Scanner) sseLine(ln []byte) {
	ln = bytes.TrimSuffix(ln, []byte{'\r'})
	if len(ln) == 0 {
		s.dispatch()
		return
	}
	if !bytes.HasPrefix(ln, dataField) {
		return // a comment or another field
	}
	v := ln[len(dataField):]
	switch {
	case len(v) == 0:
	case v[0] == ':':
		v = v[1:]
		if len(v) > 0 && v[0] == ' ' {
			v = v[1:]
		}
	default:
		return // a field whose name begins with "data"
	}
	if s.evData {
		s.addEvent([]byte{'\n'})
	}
	s.evData = true
	if !s.evKey && bytes.Contains(v, s.path.last) {
		s.evKey = true
	}
	s.addEvent(v)
}

func (s *Scanner) addEvent(b []byte) {
	if s.evOver {
		return
	}
	if len(s.ev)+len(b) > MaxEventBytes {
		s.evOver, s.ev = true, s.ev[:0]
		return
	}
	s.ev = append(s.ev, b...)
}

// dispatch ends the current event: its data is read for the path when
// it may carry it.
func (s *Scanner) dispatch() {
	if s.evData && s.evKey && !s.evOver {
		s.d.reset(s.path)
		s.d.write(s.ev)
		if r, v := s.d.finish(); r != None {
			s.found, s.val = r, v
		}
	}
	s.ev, s.evOver, s.evKey, s.evData = s.ev[:0], false, false, false
}

// Find reads one whole JSON document b at path (a request's body, read
// and bounded by the caller).
func Find(path *Path, b []byte) (Result, int64, bool) {
	var d doc
	d.reset(path)
	d.write(b)
	r, v := d.finish()
	return r, v, d.st == jDone
}
