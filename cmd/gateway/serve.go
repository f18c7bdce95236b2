package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
)

// serveCommand implements `gateway [serve]`.
func serveCommand(args, environ []string, stdout, stderr io.Writer) int {
	var f commonFlags
	fs := newFlagSet("serve", stderr, &f)
	f.addAllowEmpty(fs)
	candPath := fs.String("candidate", "", "a configuration whose limits decide every request beside the live ones, without affecting responses (see GET /admin/candidate)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	log, err := newLogger(stderr, &f)
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return exitInvalid
	}
	p, files, err := loadPolicyFiles(f.config, environ)
	for _, w := range unknownEnv(environ, policyEnvNamed(p)) {
		log.Warn(w)
	}
	if err == nil {
		err = requireRoutes(p, f.allowEmpty)
	}
	if err != nil {
		log.Error("invalid configuration", "config", f.config, "problems", problems(err))
		return exitInvalid
	}
	for _, w := range p.Warnings {
		log.Warn(w)
	}
	// The candidate is checked before anything listens.
	cp, err := loadCandidate(*candPath, p, environ, f.allowEmpty, log)
	if err != nil {
		log.Error("invalid candidate configuration", "candidate", *candPath, "problems", problems(err))
		return exitInvalid
	}
	g, err := newGateway(p, f.config, environ, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitFailure
	}
	g.liveFiles.Store(&files)
	g.allowEmpty = f.allowEmpty
	if cp != nil {
		if err := g.cand.Start(cp, *candPath); err != nil {
			log.Error("cannot start the candidate", "candidate", *candPath, "err", err)
			g.close()
			return exitFailure
		}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	if err := g.run(sigs); err != nil {
		log.Error("gateway stopped with an error", "err", err)
		return exitFailure
	}
	return exitOK
}

// certPollInterval is how often the TLS files are checked for a change.
const certPollInterval = time.Second

// run serves until SIGTERM or SIGINT, reloading on SIGHUP.
func (g *gateway) run(sigs <-chan os.Signal) error {
	p := g.handler.Policy()
	attrs := []any{"listen", g.publicLn.Addr().String(), "store", p.Store.Backend, "clock", p.Store.Clock,
		"routes", len(p.Routes), "limits", len(p.Limits), "version", version}
	if g.adminLn != nil {
		attrs = append(attrs, "admin_listen", g.adminLn.Addr().String())
	}
	if g.rls != nil {
		attrs = append(attrs, "rls_listen", g.rls.ln.Addr().String(), "rls_domains", p.RLS.Config.Domains(), "rls_tls", g.rls.certs != nil)
	}
	attrs = append(attrs, "tls", g.certs != nil, "h2c", p.Server.H2C)
	// The listeners are bound already: logged before they serve, the line
	// comes before the first answer, healthz included, so whoever waits
	// for the gateway to be healthy finds it in the log.
	g.log.Info("tollgate listening", attrs...)
	errc := make(chan error, 3)
	go func() { errc <- serve(g.public, g.publicLn) }()
	if g.admin != nil {
		go func() { errc <- serve(g.admin, g.adminLn) }()
	}
	if g.rls != nil {
		go func() {
			if err := g.rls.grpc.Serve(g.rls.ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("rls: %w", err)
			}
		}()
	}
	stopWatch := g.startWatch()
	if g.certs != nil {
		stopCerts := g.certs.Watch(certPollInterval, g.log)
		defer stopCerts()
	}
	if g.rls != nil && g.rls.certs != nil {
		stopCerts := g.rls.certs.Watch(certPollInterval, g.log)
		defer stopCerts()
	}

	for {
		select {
		case err := <-errc:
			stopWatch()
			g.shutdown()
			return err
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				g.reload()
				continue
			}
			g.log.Info("shutting down", "signal", sig.String())
			stopWatch()
			g.shutdown()
			return nil
		}
	}
}

func serve(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// shutdown drains in-flight requests up to server.shutdown_timeout, then
// releases everything (close).
func (g *gateway) shutdown() {
	g.draining.Store(true)
	p := g.handler.Policy()
	ctx, cancel := context.WithTimeout(context.Background(), p.Server.ShutdownTimeout)
	defer cancel()
	stopped := make(chan struct{})
	go func() { g.stopRLS(p.Server.ShutdownTimeout); close(stopped) }()
	if err := g.public.Shutdown(ctx); err != nil {
		g.log.Warn("shutdown deadline passed; closing remaining connections", "err", err)
		g.public.Close()
	}
	if g.admin != nil {
		actx, acancel := context.WithTimeout(context.Background(), time.Second)
		_ = g.admin.Shutdown(actx)
		acancel()
	}
	<-stopped
	g.close()
	g.log.Info("stopped")
}
