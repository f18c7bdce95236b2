package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"
)

// handler limits each client and forwards what it allows.
type handler struct {
	rp  *httputil.ReverseProxy
	lim *limiter // nil: no limit
	now func() time.Time
	// name is the limit's name as an RFC 8941 sf-string ("per-client").
	name string
	// policy is the RateLimit-Policy value, the same on every response.
	policy []string
	// denied holds the whole 429 answer, built once.
	deniedHeader http.Header
	deniedBody   []byte
}

// newHandler returns the floor's handler; rate 0 forwards everything.
// An upstream list of several URLs is balanced (balance.go).
func newHandler(upstream, balance, name string, rate int64, per time.Duration, now func() time.Time) (*handler, error) {
	h := &handler{now: now, name: strconv.Quote(name)}
	if strings.Contains(upstream, ",") {
		b, err := newBalancer(upstream, balance, newTransport())
		if err != nil {
			return nil, err
		}
		h.rp = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.Host = "" // the target's, as SetURL makes it
				pr.SetXForwarded()
			},
			Transport:  b,
			BufferPool: &bufferPool{},
		}
	} else {
		u, err := parseUpstream(upstream)
		if err != nil {
			return nil, err
		}
		h.rp = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(u)
				pr.SetXForwarded()
			},
			Transport:  newTransport(),
			BufferPool: &bufferPool{},
		}
	}
	if rate <= 0 {
		return h, nil
	}
	if per < time.Second || per%time.Second != 0 {
		return nil, fmt.Errorf("-per %s: want whole seconds", per)
	}
	h.lim = &limiter{rate: rate, per: per, windows: make(map[string]*window)}
	secs := int64(per / time.Second)
	h.policy = []string{h.name + ";q=" + strconv.FormatInt(rate, 10) + ";w=" + strconv.FormatInt(secs, 10)}
	// The constant denial: what Tollgate answers a client that exhausted
	// its window, with the longest wait the window can ask for.
	retry := strconv.FormatInt(secs, 10)
	h.deniedBody = []byte(`{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",` +
		`"title":"Too Many Requests","status":429,"detail":"rate limit \"` + name + `\" exceeded; retry in ` + retry + `s",` +
		`"violated-policies":["` + name + `"],"retry_after":` + retry + "}\n")
	h.deniedHeader = http.Header{
		"Ratelimit-Policy":       h.policy,
		"Ratelimit":              {h.name + ";r=0;t=" + retry},
		"Retry-After":            {retry},
		"Content-Type":           {"application/problem+json"},
		"Cache-Control":          {"no-store"},
		"X-Content-Type-Options": {"nosniff"},
		"Content-Length":         {strconv.Itoa(len(h.deniedBody))},
	}
	return h, nil
}

// requestID returns a fresh X-Request-Id value: 128 random bits in hex,
// as Tollgate gives every request by default (server.request_id), so
// that both programs do that work.
func requestID() []string {
	var b [32]byte
	const digits = "0123456789abcdef"
	x, y := rand.Uint64(), rand.Uint64()
	for i := range 16 {
		b[i], b[16+i] = digits[x&15], digits[y&15]
		x, y = x>>4, y>>4
	}
	return []string{string(b[:])}
}

// via is the Via entry the floor adds to every forwarded request, as
// Tollgate adds its own (a forwarding loop back to itself is answered 508).
var via = []string{"1.1 floor"}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := requestID()
	r.Header["X-Request-Id"] = id
	r.Header["Via"] = via // Tollgate's loop guard: one shared value
	w.Header()["X-Request-Id"] = id
	if h.lim == nil {
		h.rp.ServeHTTP(w, r)
		return
	}
	key := r.Header.Get("X-API-Key")
	if key == "" {
		key, _, _ = net.SplitHostPort(r.RemoteAddr)
	}
	remaining, reset, ok := h.lim.take(key, h.now())
	if !ok {
		out := w.Header()
		for k, v := range h.deniedHeader {
			out[k] = v
		}
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(h.deniedBody)
		return
	}
	var buf [64]byte
	b := append(buf[:0], h.name...)
	b = strconv.AppendInt(append(b, ";r="...), remaining, 10)
	b = strconv.AppendInt(append(b, ";t="...), int64((reset+time.Second-1)/time.Second), 10)
	out := w.Header()
	out["Ratelimit-Policy"] = h.policy
	out["Ratelimit"] = []string{string(b)}
	h.rp.ServeHTTP(w, r)
}

// limiter is a fixed-window counter per key: a map under one mutex.
// Keys are never evicted (the floor runs for one benchmark).
type limiter struct {
	rate    int64
	per     time.Duration
	mu      sync.Mutex
	windows map[string]*window
}

// window is one key's current window.
type window struct {
	start time.Time
	count int64
}

// take counts one request of key at now and reports what is left of the
// window, the time until it resets, and whether the request is allowed.
func (l *limiter) take(key string, now time.Time) (remaining int64, reset time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	win := l.windows[key]
	if win == nil {
		win = &window{start: now}
		l.windows[key] = win
	}
	if now.Sub(win.start) >= l.per {
		win.start, win.count = now, 0
	}
	reset = l.per - now.Sub(win.start)
	if win.count >= l.rate {
		return 0, reset, false
	}
	win.count++
	return l.rate - win.count, reset, true
}

// bufferPool recycles the ReverseProxy's 32 KiB copy buffers. It is
// proxy/bufpool.go's, copied on purpose: the floor imports nothing of the
// gateway (internal/depstest holds it to the standard library), so that
// it measures what net/http costs and nothing of Tollgate's own.
type bufferPool struct{ p sync.Pool }

const copyBufferSize = 32 << 10

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, copyBufferSize)
}

func (b *bufferPool) Put(buf []byte) {
	if cap(buf) != copyBufferSize {
		return
	}
	buf = buf[:copyBufferSize]
	b.p.Put(&buf)
}

// newTransport has the settings of Tollgate's upstream transport
// (proxy.NewTransport; floor_test.go keeps the two equal).
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     false,
	}
}
