package listener

import (
	"net/http"
	"time"

	"github.com/tollgate/gateway/policy"
)

// HTTP/2 bounds beside the configured stream limit. Go's server already
// refuses what the HTTP/2 attacks of the last years abused: a rapidly
// reset stream holds its handler slot until the handler returns, and more
// than four times the stream limit waiting for a slot closes the
// connection with ENHANCE_YOUR_CALM (rapid reset, CVE-2023-44487); a
// header block, CONTINUATION frames included, is bounded by
// max_header_bytes (CVE-2024-27316); more than 10,000 control frames
// (SETTINGS and PING acknowledgements) queued for a peer that does not
// read them close the connection. The values here bound what one
// connection can make the gateway buffer or wait for.
const (
	// receiveWindowConn bounds the request body bytes one connection may
	// have buffered in the gateway, across its streams.
	receiveWindowConn = 1 << 20
	// receiveWindowStream bounds them per stream: as much as the
	// connection, so one upload is not held to less than a window per
	// round trip than HTTP/1.1 would give it.
	receiveWindowStream = 1 << 20
	// pingTimeout closes a connection whose peer does not answer a PING
	// (sent after the connection has been idle for SendPingTimeout) in time.
	pingTimeout     = 15 * time.Second
	sendPingTimeout = 30 * time.Second
	// writeByteTimeout closes a connection whose peer stops reading the
	// responses for this long. One stuck HTTP/2 connection pins up to
	// the stream limit's handlers and upstream requests, so the bound is
	// worth its cost: Go arms a write deadline on every flush, about 10%
	// of the CPU of an h2c request (BENCHMARKS.md).
	writeByteTimeout = 30 * time.Second
)

// Configure sets srv's protocols from s: HTTP/1.1 always, HTTP/2 over TLS
// (negotiated by ALPN) and, with h2c, cleartext HTTP/2 with prior
// knowledge; and the HTTP/2 bounds.
func Configure(srv *http.Server, s policy.Server) {
	var p http.Protocols
	p.SetHTTP1(true)
	if s.TLS != nil {
		p.SetHTTP2(true)
	}
	if s.H2C {
		p.SetUnencryptedHTTP2(true)
	}
	srv.Protocols = &p
	srv.HTTP2 = &http.HTTP2Config{
		MaxConcurrentStreams:          s.HTTP2MaxConcurrentStreams,
		MaxReceiveBufferPerConnection: receiveWindowConn,
		MaxReceiveBufferPerStream:     receiveWindowStream,
		SendPingTimeout:               sendPingTimeout,
		PingTimeout:                   pingTimeout,
		WriteByteTimeout:              writeByteTimeout,
	}
}
