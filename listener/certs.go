// Package listener is the public listener's TLS and HTTP/2: the
// certificates chosen by SNI and swapped without dropping a connection,
// client certificates for mutual TLS, cleartext HTTP/2 and the bounds an
// HTTP/2 client cannot talk the gateway out of.
package listener

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/internal/regularfile"
	"github.com/tollgate/gateway/policy"
)

// Certs is the live certificate set of a TLS listener. Its TLS config
// reads the set anew for every handshake, so Reload changes what new
// connections are served while open connections keep theirs. It is safe
// for concurrent use.
type Certs struct {
	cur atomic.Pointer[certSet]
	// readFile reads certificate files: regular files of at most
	// maxCertFile bytes, opened without waiting (a FIFO put in a
	// certificate's place would otherwise hold the watcher's reload, and
	// a startup, until someone writes to it), unless a test sets it.
	readFile func(string) ([]byte, error)
}

// certSet is one loaded generation of certificates: the handshake config
// built from them and the files' stamps when they were read.
type certSet struct {
	cfg    *tls.Config
	tls    policy.TLS
	stamps []stamp
}

// stamp is what a file looked like: a change of any field is a change.
type stamp struct {
	path string
	mod  time.Time
	size int64
	err  bool // the file could not be read
}

// maxCertFile bounds a certificate, key or CA file: a chain of a few
// certificates is kilobytes; a CA bundle such as the system's is under a
// megabyte.
const maxCertFile = 16 << 20

func readCertFile(path string) ([]byte, error) { return regularfile.Read(path, maxCertFile) }

// Load reads t's certificates, keys and client CAs.
func Load(t *policy.TLS) (*Certs, error) {
	c := &Certs{readFile: readCertFile}
	if err := c.Reload(t); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads t's files again and swaps them in for new handshakes. On
// any error the previous set keeps serving and the error says why.
func (c *Certs) Reload(t *policy.TLS) error {
	if t == nil || len(t.Certificates) == 0 {
		return errors.New("tls: no certificate configured")
	}
	set := &certSet{tls: *t, stamps: stamps(t)}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// h2 first: a client offering both gets HTTP/2.
		NextProtos: []string{"h2", "http/1.1"},
	}
	for _, f := range t.Certificates {
		cert, err := f.Load(c.readFile)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		// Several certificates: Go serves the first whose names (and key
		// type) suit the client's hello, the first of all when none does.
		cfg.Certificates = append(cfg.Certificates, cert)
	}
	if t.ClientCAFile != "" {
		pool, err := t.LoadClientCAs(c.readFile)
		if err != nil {
			return fmt.Errorf("tls: client_ca_file: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		if t.ClientAuthOptional {
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	set.cfg = cfg
	c.cur.Store(set)
	return nil
}

// TLSConfig returns the listener's config: every handshake takes the
// current set's config, so a reload needs no new listener.
func (c *Certs) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return c.cur.Load().cfg, nil
		},
	}
}

// files lists every file of t.
func files(t *policy.TLS) []string {
	var fs []string
	for _, f := range t.Certificates {
		fs = append(fs, f.Cert, f.Key)
	}
	if t.ClientCAFile != "" {
		fs = append(fs, t.ClientCAFile)
	}
	return fs
}

// stamps stats every file of t. os.Stat follows symbolic links, so a
// Kubernetes Secret volume's swapped "..data" link is a change.
func stamps(t *policy.TLS) []stamp {
	fs := files(t)
	out := make([]stamp, len(fs))
	for i, f := range fs {
		out[i].path = f
		fi, err := os.Stat(f)
		if err != nil {
			out[i].err = true
			continue
		}
		out[i].mod, out[i].size = fi.ModTime(), fi.Size()
	}
	return out
}
