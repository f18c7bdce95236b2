package e2e

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// servedSerial is the serial of the certificate a new TLS handshake with
// the gateway gets.
func servedSerial(t testing.TB, f *front) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", f.Listen, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// waitSerial polls new handshakes until they get serial, for up to 10 s.
func waitSerial(t testing.TB, f *front, serial int64, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := servedSerial(t, f)
		if got == serial {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: new handshakes still get serial %d, want %d", what, got, serial)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCertificateReloadUnderLoad: while clients send requests without
// pause over HTTP/2 (one long-lived connection each) and over HTTP/1.1
// with a new handshake per request, the certificate is replaced on disk
// (picked up by the file watch) and again with SIGHUP; no request fails,
// and new handshakes get each new certificate. A mismatched key on disk
// and a reload naming it keep the certificate served and say why.
func TestCertificateReloadUnderLoad(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	body := fmt.Sprintf("[[routes]]\nname = \"api\"\npath_prefix = \"/\"\nupstream = %q\n", up.URL)
	f := startFront(t, protocols[2], false, body)
	first := servedSerial(t, f)

	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := func(c *http.Client) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := c.Get(f.url("/x"))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			} else {
				ok.Add(1)
			}
		}
	}
	for range 2 {
		wg.Add(2)
		go client(f.client(t))
		h1 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool()}, DisableKeepAlives: true}
		go client(&http.Client{Transport: h1, Timeout: 10 * time.Second})
	}

	// 1: a new pair renamed over the files; the watch picks it up.
	next := f.ca.Server(t, "127.0.0.1", "localhost")
	writeFileAtomic(t, f.keyFile, next.KeyPEM)
	writeFileAtomic(t, f.certFile, next.CertPEM)
	waitSerial(t, f, next.Serial, "after the files changed")

	// 2: a key that does not match the certificate: the watch keeps
	// the served pair, and a reload is rejected with the reason.
	stray := f.ca.Server(t, "127.0.0.1")
	writeFileAtomic(t, f.keyFile, stray.KeyPEM)
	time.Sleep(1500 * time.Millisecond) // more than a poll
	if got := servedSerial(t, f); got != next.Serial {
		t.Errorf("with a mismatched key on disk, handshakes get serial %d, want the previous %d", got, next.Serial)
	}
	rd := reloadAndWait(t, f.gw, nil)
	if rd.LastReload.OK || !strings.Contains(rd.LastReload.Error, "server.tls") || !strings.Contains(rd.LastReload.Error, "private key does not match") {
		t.Errorf("reload with a mismatched key: last_reload %+v, want rejected naming server.tls and the key", rd.LastReload)
	}
	if !strings.Contains(f.output(), "do not load; keeping the previous ones") {
		t.Errorf("the watch did not log why it kept the certificate")
	}

	// 3: the matching key arrives with a third pair and SIGHUP.
	third := f.ca.Server(t, "127.0.0.1", "localhost")
	writeFileAtomic(t, f.keyFile, third.KeyPEM)
	writeFileAtomic(t, f.certFile, third.CertPEM)
	f.signal(t, syscall.SIGHUP)
	waitSerial(t, f, third.Serial, "after SIGHUP")

	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d requests failed across the certificate changes (first: %v)", n, n+ok.Load(), firstErr.Load())
	}
	if ok.Load() < 20 {
		t.Errorf("only %d requests were made: the load did not run", ok.Load())
	}
	t.Logf("%d requests across 3 certificate changes (serials %d → %d → %d)", ok.Load(), first, next.Serial, third.Serial)
}

// TestCertificateFIFOKeepsWatching: a FIFO renamed over the certificate
// file (no writer ever comes) is refused as not a regular file, and the
// watch goes on: the next real pair is picked up. Reading the FIFO
// without O_NONBLOCK held the watch's goroutine in open(2) for good, so
// no later change of the files was ever served.
func TestCertificateFIFOKeepsWatching(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	body := fmt.Sprintf("[[routes]]\nname = \"api\"\npath_prefix = \"/\"\nupstream = %q\n", up.URL)
	f := startFront(t, protocols[2], false, body)
	first := servedSerial(t, f)

	fifo := f.certFile + ".fifo"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fifo, f.certFile); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // more than a poll
	if got := servedSerial(t, f); got != first {
		t.Errorf("with a FIFO for a certificate, handshakes get serial %d, want the previous %d", got, first)
	}
	next := f.ca.Server(t, "127.0.0.1", "localhost")
	writeFileAtomic(t, f.keyFile, next.KeyPEM)
	writeFileAtomic(t, f.certFile, next.CertPEM)
	waitSerial(t, f, next.Serial, "after the FIFO was replaced by a certificate")
	if !strings.Contains(f.output(), "not a regular file") {
		t.Errorf("the log does not say why the FIFO was refused")
	}
}
