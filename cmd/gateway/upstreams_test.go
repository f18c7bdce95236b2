package main

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tollgate/gateway/upstream"
)

// TestUnreadyUpstreamsBounded: /readyz names at most maxUnreadyRoutes
// routes without a healthy target, each with at most maxUnreadyTargets
// targets and the count of the rest, and counts every such route.
func TestUnreadyUpstreamsBounded(t *testing.T) {
	// Ports that refuse connections: every probe fails at once.
	var dead []string
	for range 12 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, "http://"+ln.Addr().String())
		ln.Close()
	}
	hc := &upstream.HealthCheck{Path: "/healthz", Interval: 100 * time.Millisecond, Timeout: 100 * time.Millisecond,
		UnhealthyAfter: 1, HealthyAfter: 1}
	specs := map[string]*upstream.Spec{}
	for r := range 12 {
		s := &upstream.Spec{Health: hc}
		for _, d := range dead {
			u, _ := url.Parse(d)
			s.Targets = append(s.Targets, upstream.TargetSpec{URL: u, Weight: 1})
		}
		specs[fmt.Sprintf("route-%02d", r)] = s
	}
	reg := upstream.NewRegistry(upstream.Options{})
	defer reg.Close()
	reg.Update(specs)
	g := &gateway{upstreams: reg}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, n := g.unreadyUpstreams(); n == 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the routes did not all turn unhealthy")
		}
		time.Sleep(20 * time.Millisecond)
	}
	list, n := g.unreadyUpstreams()
	if n != 12 || len(list) != maxUnreadyRoutes {
		t.Fatalf("%d routes listed of %d; want %d of 12", len(list), n, maxUnreadyRoutes)
	}
	for _, r := range list {
		if len(r.Targets) != maxUnreadyTargets || r.More != 2 || r.Targets[0].LastError == "" {
			t.Fatalf("route %s: %d targets, %d more, first error %q", r.Route, len(r.Targets), r.More, r.Targets[0].LastError)
		}
	}
}

// TestDashboardUpstreamsBounded: the dashboard's data, fetched every
// second, holds at most dashboardTargets targets per route, the
// unhealthy ones first, and counts the rest; /admin/upstreams holds all.
func TestDashboardUpstreamsBounded(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	defer srv.Close()
	s := &upstream.Spec{Health: &upstream.HealthCheck{Path: "/", Interval: 100 * time.Millisecond,
		Timeout: 100 * time.Millisecond, UnhealthyAfter: 1, HealthyAfter: 1}}
	for range 79 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		u, _ := url.Parse("http://" + ln.Addr().String())
		s.Targets = append(s.Targets, upstream.TargetSpec{URL: u, Weight: 1})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead, _ := url.Parse("http://" + ln.Addr().String())
	ln.Close() // the last target refuses connections
	s.Targets = append(s.Targets, upstream.TargetSpec{URL: dead, Weight: 1})
	reg := upstream.NewRegistry(upstream.Options{})
	defer reg.Close()
	reg.Update(map[string]*upstream.Spec{"api": s})
	g := &gateway{upstreams: reg}
	deadline := time.Now().Add(30 * time.Second)
	for g.upstreamsView()[0].Healthy != 79 {
		if time.Now().After(deadline) {
			t.Fatalf("want 79 healthy targets, have %d", g.upstreamsView()[0].Healthy)
		}
		time.Sleep(20 * time.Millisecond)
	}
	v := g.dashboardUpstreams()[0]
	if len(v.Targets) != dashboardTargets || v.More != 80-dashboardTargets {
		t.Fatalf("dashboard: %d targets, %d more", len(v.Targets), v.More)
	}
	if v.Targets[0].Address != dead.Host || v.Targets[0].Healthy {
		t.Fatalf("dashboard: first target %+v, want the unhealthy %s", v.Targets[0], dead.Host)
	}
	if all := g.upstreamsView()[0]; len(all.Targets) != 80 || all.More != 0 {
		t.Fatalf("/admin/upstreams: %d targets, more %d", len(all.Targets), all.More)
	}
}
