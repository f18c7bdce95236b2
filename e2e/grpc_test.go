package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/gateway/internal/testcerts"
)

// rawCodec passes messages as the bytes they are, so a test service needs
// no generated code.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// The echo service's calls say "application/grpc+raw"; the server finds
// the codec by that name.
func init() { encoding.RegisterCodec(rawCodec{}) }

// echoDesc is a bidirectional streaming service: every message comes back
// upper-cased, and the call ends with the trailer x-echo-count.
var echoDesc = grpc.ServiceDesc{
	ServiceName: "tollgate.test.Echo",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Chat", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			n := 0
			for {
				var m []byte
				if err := stream.RecvMsg(&m); err == io.EOF {
					stream.SetTrailer(metadata.Pairs("x-echo-count", strconv.Itoa(n)))
					return nil
				} else if err != nil {
					return err
				}
				n++
				out := []byte(strings.ToUpper(string(m)))
				if err := stream.SendMsg(&out); err != nil {
					return err
				}
			}
		},
	}},
}

// grpcUpstream is a gRPC server with the health service and the echo
// service, over cleartext HTTP/2 (tls nil) or TLS.
type grpcUpstream struct {
	addr   string
	health *health.Server
}

func startGRPCUpstream(t testing.TB, cert *tls.Certificate) *grpcUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{*cert}})))
	}
	hs := health.NewServer()
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&echoDesc, struct{}{})
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return &grpcUpstream{addr: ln.Addr().String(), health: hs}
}

// grpcBody routes everything to upstream under a 2-per-minute limit per
// client for the health Check method only.
func grpcBody(upstream string) string {
	return fmt.Sprintf(`
[[limits]]
name = "checks"
rates = ["2/minute"]

[[routes]]
name = "check"
path_prefix = "/grpc.health.v1.Health/Check"
upstream = %q
limits = ["checks"]

[[routes]]
name = "rest"
path_prefix = "/"
upstream = %q
`, upstream, upstream)
}

// dialGateway returns a gRPC client of f.
func dialGateway(t testing.TB, f *front) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if f.proto.tls {
		creds = credentials.NewTLS(&tls.Config{RootCAs: f.ca.Pool()})
	}
	conn, err := grpc.NewClient("passthrough:///"+f.Listen, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestGRPCThroughGateway: a gRPC client's unary, server-streaming and
// bidirectional calls work through the gateway, over h2c and TLS on the
// client side, to an h2c:// and an https:// upstream, trailers included.
func TestGRPCThroughGateway(t *testing.T) {
	t.Parallel()
	for _, pr := range protocols[1:] {
		for _, upTLS := range []bool{false, true} {
			name := pr.name + "/h2c-upstream"
			if upTLS {
				name = pr.name + "/https-upstream"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var env []string
				var cert *tls.Certificate
				if upTLS {
					ca := testcerts.NewCA(t, "upstream CA")
					c := ca.Server(t, "127.0.0.1").TLS(t)
					cert = &c
					// The gateway trusts the upstream's CA the way any Go
					// program on Linux can be told to.
					env = append(env, "SSL_CERT_FILE="+writeFile(t, t.TempDir(), "up-ca.pem", ca.PEM))
				}
				up := startGRPCUpstream(t, cert)
				target := "h2c://" + up.addr
				if upTLS {
					target = "https://" + up.addr
				}
				data, ca, _, _ := frontData(t, pr, t.TempDir(), "", "", grpcBody(target))
				f := &front{gw: startGateway(t, "front.toml.tmpl", gwOpts{Data: data, Env: env}), proto: pr, ca: ca}
				conn := dialGateway(t, f)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()

				// Unary.
				hc := healthpb.NewHealthClient(conn)
				resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
				if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
					t.Fatalf("unary Check through the gateway: %v, %v", resp, err)
				}

				// Server streaming: the first status, then a change.
				w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
				if err != nil {
					t.Fatal(err)
				}
				up.health.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
				seen := map[healthpb.HealthCheckResponse_ServingStatus]bool{}
				for !seen[healthpb.HealthCheckResponse_NOT_SERVING] {
					m, err := w.Recv()
					if err != nil {
						t.Fatalf("Watch through the gateway after %v: %v", seen, err)
					}
					seen[m.Status] = true
					if m.Status == healthpb.HealthCheckResponse_SERVING {
						up.health.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
					}
				}

				// Bidirectional streaming with a trailer.
				st, err := conn.NewStream(ctx, &echoDesc.Streams[0], "/tollgate.test.Echo/Chat", grpc.ForceCodec(rawCodec{}))
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range []string{"one", "two", "three"} {
					b := []byte(m)
					if err := st.SendMsg(&b); err != nil {
						t.Fatalf("send %q: %v", m, err)
					}
					var got []byte
					if err := st.RecvMsg(&got); err != nil || string(got) != strings.ToUpper(m) {
						t.Fatalf("echo of %q: %q, %v", m, got, err)
					}
				}
				if err := st.CloseSend(); err != nil {
					t.Fatal(err)
				}
				var none []byte
				if err := st.RecvMsg(&none); err != io.EOF {
					t.Fatalf("end of the echo stream: %v, want EOF (status OK in the trailers)", err)
				}
				if got := st.Trailer().Get("x-echo-count"); len(got) != 1 || got[0] != "3" {
					t.Errorf("trailer x-echo-count = %v, want [3] (trailers must pass the gateway)", got)
				}
			})
		}
	}
}

// TestGRPCLimited: a limited gRPC call gets RESOURCE_EXHAUSTED, as HTTP
// 200 with grpc-status 8, grpc-retry-pushback-ms and the rate-limit
// headers, on both stores; the upstream never sees it.
func TestGRPCLimited(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"memory", "redis"} {
		for _, pr := range protocols[1:] {
			t.Run(store+"/"+pr.name, func(t *testing.T) {
				t.Parallel()
				up := startGRPCUpstream(t, nil)
				f := startFront(t, pr, store == "redis", grpcBody("h2c://"+up.addr))
				conn := dialGateway(t, f)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				hc := healthpb.NewHealthClient(conn)
				for i := 0; i < 2; i++ {
					var hdr metadata.MD
					if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr)); err != nil {
						t.Fatalf("call %d: %v", i+1, err)
					}
					if got := hdr.Get("ratelimit-policy"); len(got) != 1 || got[0] != `"checks";q=2;w=60` {
						t.Errorf("call %d: RateLimit-Policy %v", i+1, got)
					}
				}
				var hdr, trl metadata.MD
				_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
				if status.Code(err) != codes.ResourceExhausted {
					t.Fatalf("third call: %v, want RESOURCE_EXHAUSTED", err)
				}
				if !strings.Contains(status.Convert(err).Message(), `rate limit "checks" exceeded`) {
					t.Errorf("message %q does not say which limit", status.Convert(err).Message())
				}
				md := metadata.Join(hdr, trl)
				pb := md.Get("grpc-retry-pushback-ms")
				if len(pb) != 1 {
					t.Fatalf("grpc-retry-pushback-ms = %v in %v", pb, md)
				}
				// The sliding window counter's wait reaches two windows.
				if ms, err := strconv.Atoi(pb[0]); err != nil || ms < 1 || ms > 120000 {
					t.Errorf("grpc-retry-pushback-ms = %q, want 1..120000", pb[0])
				}
				if len(md.Get("ratelimit")) != 1 || len(md.Get("retry-after")) != 1 {
					t.Errorf("no RateLimit / Retry-After in %v", md)
				}

				// What the wire says: HTTP 200, grpc-status 8, no 429.
				c := f.client(t)
				req, _ := http.NewRequest("POST", f.url("/grpc.health.v1.Health/Check"), strings.NewReader("\x00\x00\x00\x00\x00"))
				req.Header.Set("Content-Type", "application/grpc")
				req.Header.Set("TE", "trailers")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Header.Get("Grpc-Status") != "8" || resp.Header.Get("Content-Type") != "application/grpc" {
					t.Errorf("limited gRPC call on the wire: %d, grpc-status %q, content-type %q; want 200, 8, application/grpc",
						resp.StatusCode, resp.Header.Get("Grpc-Status"), resp.Header.Get("Content-Type"))
				}
			})
		}
	}
}
