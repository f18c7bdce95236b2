package accesslog

import (
	"bufio"
	"errors"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// combinedTime is the combined format's timestamp, with microseconds.
const combinedTime = "02/Jan/2006:15:04:05.000000 -0700"

// jsonTime is the jsonl format's timestamp.
const jsonTime = "2006-01-02T15:04:05.000000Z07:00"

// Options configures a Writer.
type Options struct {
	// Format is Combined or JSONL. Default Combined.
	Format Format
	// RawClient logs the client identity and IP as they are instead of
	// hashed. API keys are always hashed. Default false.
	RawClient bool
	// Salt is mixed into every hash (see Hash). Default none.
	Salt []byte
	// IPv6Prefix, when set (1..128), makes a hashed log hash an IPv6
	// client address (the IP, and the client when it is the IP) as its
	// prefix of that many bits, the way the gateway counts it
	// (identity.ipv6_prefix): clients that rotate addresses inside one
	// prefix stay one client in a replay. A raw log keeps the address.
	// Default 0: every address is hashed whole.
	IPv6Prefix int
	// BufferSize is the size of the output buffer. Default 64 KiB.
	BufferSize int
	// FlushInterval, when positive, flushes the buffer that often from a
	// goroutine that Close stops. Default 0: the buffer is written when
	// full, on Flush and on Close.
	FlushInterval time.Duration
}

// Writer writes one line per Log call to an io.Writer through a buffer.
// It is safe for concurrent use; lines are never interleaved.
type Writer struct {
	opts Options
	pool sync.Pool // *[]byte line buffers

	closeOnce sync.Once
	mu        sync.Mutex
	w         *bufio.Writer
	closer    io.Closer
	err       error
	closed    bool
	stop      chan struct{}
	done      chan struct{}
}

// NewWriter returns a Writer to w. If w is an io.Closer, Close closes it.
func NewWriter(w io.Writer, o Options) (*Writer, error) {
	if o.Format == Auto {
		o.Format = Combined
	}
	if o.Format != Combined && o.Format != JSONL {
		return nil, errors.New("accesslog: format must be combined or jsonl")
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 64 << 10
	}
	lw := &Writer{opts: o, w: bufio.NewWriterSize(w, o.BufferSize)}
	if c, ok := w.(io.Closer); ok {
		lw.closer = c
	}
	lw.pool.New = func() any { b := make([]byte, 0, 512); return &b }
	if o.FlushInterval > 0 {
		lw.stop, lw.done = make(chan struct{}), make(chan struct{})
		go lw.flushLoop(o.FlushInterval)
	}
	return lw, nil
}

func (lw *Writer) flushLoop(d time.Duration) {
	defer close(lw.done)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-lw.stop:
			return
		case <-t.C:
			_ = lw.Flush()
		}
	}
}

// Log writes e as one line. Client, IP and APIKey are hashed as configured.
// Write errors are kept: Err, Flush and Close report the first one.
func (lw *Writer) Log(e *Entry) {
	bp := lw.pool.Get().(*[]byte)
	b := lw.Append((*bp)[:0], e)
	lw.mu.Lock()
	if lw.err == nil && !lw.closed {
		_, lw.err = lw.w.Write(b)
	}
	lw.mu.Unlock()
	if cap(b) <= 64<<10 {
		*bp = b
		lw.pool.Put(bp)
	}
}

// Append appends the line Log would write for e, newline included.
func (lw *Writer) Append(dst []byte, e *Entry) []byte {
	if e.RLS != nil {
		return lw.appendRLS(dst, e)
	}
	var client, ip, key [16]byte
	c, i := []byte(nil), []byte(nil)
	if e.Client != "" {
		switch {
		case lw.opts.RawClient && e.ClientKind != "api_key":
			// An API key is a credential: raw_client never logs it.
			c = append(client[:0], e.Client...)
		case e.ClientKind == "ip":
			c = appendHash(client[:0], lw.opts.Salt, e.ClientKind, lw.counted(e.Client))
		default:
			c = appendHash(client[:0], lw.opts.Salt, e.ClientKind, e.Client)
		}
	}
	if e.IP != "" {
		if lw.opts.RawClient {
			i = append(ip[:0], e.IP...)
		} else {
			i = appendHash(ip[:0], lw.opts.Salt, "ip", lw.counted(e.IP))
		}
	}
	var k []byte
	if e.APIKey != "" {
		k = appendHash(key[:0], lw.opts.Salt, "api_key", e.APIKey)
	}
	if lw.opts.Format == JSONL {
		return appendJSON(dst, e, c, i, k)
	}
	return appendCombined(dst, e, c, i, k)
}

// counted returns the form of the address ip that the gateway counts: an
// IPv6 address masked to Options.IPv6Prefix bits, in prefix notation
// ("2001:db8:1:2::/64"); anything else as it is.
func (lw *Writer) counted(ip string) string {
	bits := lw.opts.IPv6Prefix
	if bits <= 0 || bits > 128 || strings.IndexByte(ip, ':') < 0 {
		return ip
	}
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is6() || a.Is4In6() {
		return ip
	}
	return netip.PrefixFrom(a.WithZone(""), bits).Masked().String()
}

func appendCombined(b []byte, e *Entry, client, ip, key []byte) []byte {
	b = appendToken(b, client)
	b = append(b, " - - ["...)
	b = e.Time.AppendFormat(b, combinedTime)
	b = append(b, "] \""...)
	b = appendToken(b, e.Method)
	b = append(b, ' ')
	b = appendToken(b, e.Path)
	b = append(b, ' ')
	b = appendToken(b, e.Proto)
	b = append(b, "\" "...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, ' ')
	if e.Bytes < 0 {
		b = append(b, '-')
	} else {
		b = strconv.AppendInt(b, e.Bytes, 10)
	}
	b = append(b, " \""...)
	b = appendToken(b, e.Referer)
	b = append(b, "\" \""...)
	b = appendToken(b, e.UserAgent)
	b = append(b, "\" route="...)
	b = appendToken(b, e.Route)
	b = append(b, " outcome="...)
	b = appendToken(b, e.Outcome)
	b = append(b, " decision="...)
	b = appendToken(b, e.Decision)
	b = append(b, " limit="...)
	b = appendToken(b, e.Limit)
	b = append(b, " latency="...)
	b = appendSeconds(b, e.Latency)
	b = append(b, " kind="...)
	b = appendToken(b, e.ClientKind)
	b = append(b, " key="...)
	b = appendToken(b, key)
	b = append(b, " ip="...)
	b = appendToken(b, ip)
	if e.Consumer != "" || e.Plan != "" {
		b = append(b, " consumer="...)
		b = appendToken(b, e.Consumer)
		b = append(b, " plan="...)
		b = appendToken(b, e.Plan)
	}
	if e.RequestID != "" {
		b = append(b, " request_id="...)
		b = appendToken(b, e.RequestID)
	}
	if len(e.Units) > 0 {
		b = append(b, " units="...)
		for i, u := range e.Units {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendToken(b, u.Limit)
			b = append(b, ':')
			b = strconv.AppendInt(b, u.N, 10)
		}
	}
	return append(b, '\n')
}

// appendSeconds writes d in seconds with microsecond precision.
func appendSeconds(b []byte, d time.Duration) []byte {
	if d < 0 {
		d = 0
	}
	us := int64(d / time.Microsecond)
	b = strconv.AppendInt(b, us/1e6, 10)
	b = append(b, '.')
	frac := us % 1e6
	for div := int64(1e5); div > 0; div /= 10 {
		b = append(b, byte('0'+frac/div%10))
	}
	return b
}

const hexDigits = "0123456789ABCDEF"

// appendToken writes v with %XX escapes, or "-" when v is empty; a literal
// "-" is written as "%2D" so that it reads back as itself.
func appendToken[S ~string | ~[]byte](b []byte, v S) []byte {
	if len(v) == 0 {
		return append(b, '-')
	}
	if len(v) == 1 && v[0] == '-' {
		return append(b, "%2D"...)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f || c == '%' || c == '"' || c == '\\' {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
}

func appendJSON(b []byte, e *Entry, client, ip, key []byte) []byte {
	b = append(b, `{"time":"`...)
	b = e.Time.AppendFormat(b, jsonTime)
	b = append(b, '"')
	b = appendField(b, "client", client)
	b = appendField(b, "kind", e.ClientKind)
	b = appendField(b, "key", key)
	b = appendField(b, "ip", ip)
	b = appendField(b, "method", e.Method)
	b = appendField(b, "path", e.Path)
	b = appendField(b, "proto", e.Proto)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	if e.Bytes >= 0 {
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, e.Bytes, 10)
	}
	b = appendField(b, "referer", e.Referer)
	b = appendField(b, "user_agent", e.UserAgent)
	b = appendField(b, "route", e.Route)
	b = appendField(b, "outcome", e.Outcome)
	b = appendField(b, "decision", e.Decision)
	b = appendField(b, "limit", e.Limit)
	b = appendField(b, "consumer", e.Consumer)
	b = appendField(b, "plan", e.Plan)
	b = appendField(b, "request_id", e.RequestID)
	if len(e.Units) > 0 {
		b = append(b, `,"units":{`...)
		for i, u := range e.Units {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, u.Limit)
			b = append(b, ':')
			b = strconv.AppendInt(b, u.N, 10)
		}
		b = append(b, '}')
	}
	b = append(b, `,"latency":`...)
	b = appendSeconds(b, e.Latency)
	return append(b, "}\n"...)
}

// appendField writes ,"name":"value", or nothing when value is empty.
func appendField[S ~string | ~[]byte](b []byte, name string, v S) []byte {
	if len(v) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return appendJSONString(b, v)
}

// appendJSONString writes v as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendJSONString[S ~string | ~[]byte](b []byte, v S) []byte {
	b = append(b, '"')
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(string(v[i:min(i+utf8.UTFMax, len(v))]))
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, v[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// Flush writes buffered lines to the underlying writer.
func (lw *Writer) Flush() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err == nil && !lw.closed {
		lw.err = lw.w.Flush()
	}
	return lw.err
}

// Err returns the first write error, if any.
func (lw *Writer) Err() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.err
}

// Close stops the flush goroutine, flushes, and closes the underlying
// writer if it is an io.Closer. Log after Close writes nothing.
func (lw *Writer) Close() error {
	lw.closeOnce.Do(func() {
		if lw.stop != nil {
			close(lw.stop)
			<-lw.done
		}
		lw.mu.Lock()
		defer lw.mu.Unlock()
		if lw.err == nil {
			lw.err = lw.w.Flush()
		}
		lw.closed = true
		if lw.closer != nil {
			if err := lw.closer.Close(); lw.err == nil {
				lw.err = err
			}
		}
	})
	return lw.Err()
}
