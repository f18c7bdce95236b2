package upstream

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// serveDNS answers A queries for every name with addrs, on a UDP
// loopback socket, until the test ends; it returns the resolver asking it.
func serveDNS(t *testing.T, addrs ...[4]byte) *net.Resolver {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				for _, a := range addrs {
					_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}, dnsmessage.AResource{A: a})
				}
			}
			if msg, err := b.Finish(); err == nil {
				_, _ = pc.WriteTo(msg, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// A name dialled by GuardedDial never reaches an address no upstream is
// at: 0.0.0.0 (which reaches the local host's loopback) and the metadata
// address are refused, the name's other addresses still dialled; an IP
// literal is dialled as written.
func TestGuardedDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, tc := range []struct {
		name   string
		answer [][4]byte
		addr   string
		ok     bool
	}{
		{"name to 0.0.0.0", [][4]byte{{0, 0, 0, 0}}, "svc.example:" + port, false},
		{"name to the metadata address", [][4]byte{{169, 254, 169, 254}}, "svc.example:" + port, false},
		{"name to 0.0.0.0 and loopback", [][4]byte{{0, 0, 0, 0}, {127, 0, 0, 1}}, "svc.example:" + port, true},
		{"name to loopback", [][4]byte{{127, 0, 0, 1}}, "svc.example:" + port, true},
		{"0.0.0.0 written as the target", nil, "0.0.0.0:" + port, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &net.Dialer{Timeout: 5 * time.Second, Resolver: serveDNS(t, tc.answer...)}
			c, err := GuardedDial(d)(context.Background(), "tcp", tc.addr)
			if c != nil {
				c.Close()
			}
			if tc.ok && err != nil {
				t.Fatalf("dial %s: %v", tc.addr, err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "refusing")) {
				t.Fatalf("dial %s: %v, want it refused", tc.addr, err)
			}
		})
	}
}
