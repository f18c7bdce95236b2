package main

import (
	"fmt"
	"strings"
)

// mode is one way of running a target.
type mode struct {
	name string
	// limit: "" (plain proxy), "allow" (a limit that never denies) or
	// "deny" (a limit the hot key exhausts on its first request).
	limit string
	// manyKeys rotates Options.keys API keys instead of one hot key.
	manyKeys bool
	// redis selects store.backend = "redis" (gateway only).
	redis bool
	// targets > 0 balances over that many upstream addresses (one
	// upstream process listening on each) by balance; nginx sits these
	// modes out.
	targets int
	balance string
}

// allModes are the benchmark's modes, in table order.
var allModes = []mode{
	{name: "plain"},
	{name: "allow-1key", limit: "allow"},
	{name: "allow-10kkeys", limit: "allow", manyKeys: true},
	{name: "deny-hot", limit: "deny"},
	{name: "redis-allow-1key", limit: "allow", redis: true},
	{name: "redis-allow-10kkeys", limit: "allow", manyKeys: true, redis: true},
	{name: "redis-deny-hot", limit: "deny", redis: true},
	{name: "rr-2", targets: 2, balance: "round_robin"},
	{name: "rr-8", targets: 8, balance: "round_robin"},
	{name: "lr-2", targets: 2, balance: "least_request"},
	{name: "lr-8", targets: 8, balance: "least_request"},
}

// maxTargets is the most targets a mode balances over: the upstream
// process listens on that many addresses.
const maxTargets = 8

// Rates of the two limits. "allow" can never be reached by wrk on loopback
// (nginx: a huge rate with a burst as large, nodelay); "deny" lets the hot
// key's first request through and denies the rest of the run.
const (
	allowRate      = "1000000000/second"
	denyRate       = "1/hour"
	nginxAllowRate = "1000000r/s"
	nginxAllowBurs = 1000000
	nginxDenyRate  = "1r/m"
	floorAllowRate = 1000000000 // per second
)

// gatewayTOML is the configuration of one gateway process.
func gatewayTOML(m mode, listen, admin, upstream, redisAddr, storeTimeout string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# peer benchmark, mode %s
[server]
listen = %q
admin_listen = %q

[store]
backend = %q
on_error = "local"
timeout = %q
`, m.name, listen, admin, map[bool]string{false: "memory", true: "redis"}[m.redis], storeTimeout)
	if m.redis {
		fmt.Fprintf(&b, `
[store.redis]
url = "redis://%s/0"
prefix = "bench-%s:"
`, redisAddr, m.name)
	}
	b.WriteString(`
[identity]
sources = ["api_key", "ip"]
api_key_header = "X-API-Key"

[headers]
emit = ["ietf"]
`)
	var limits string
	if m.limit != "" {
		rate := allowRate
		if m.limit == "deny" {
			rate = denyRate
		}
		limits = `"per-client"`
		fmt.Fprintf(&b, `
[gateway]
limits = [%s]

[[limits]]
name = "per-client"
rates = [%q]
algorithm = "sliding_window_counter"
by = ["client"]
`, limits, rate)
	}
	if m.targets > 0 {
		// upstream is the list of the upstream's addresses.
		addrs := strings.Split(upstream, ",")[:m.targets]
		fmt.Fprintf(&b, `
[[routes]]
name = "upstream"
path_prefix = "/"
balance = %q
timeout = "30s"
upstreams = ["http://%s"]
`, m.balance, strings.Join(addrs, `", "http://`))
		return b.String()
	}
	fmt.Fprintf(&b, `
[[routes]]
name = "upstream"
path_prefix = "/"
upstream = "http://%s"
timeout = "30s"
`, strings.Split(upstream, ",")[0])
	return b.String()
}

// nginxServer is one nginx server block: a port and its limit.
type nginxServer struct {
	port  int
	limit string // "", "allow", "deny"
}

// nginxConf is the configuration of the nginx peer: one process, one
// server block per mode, the upstream behind keep-alive connections.
func nginxConf(dir string, workers int, upstream string, servers []nginxServer, foreground bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# peer benchmark: nginx in front of the same upstream
daemon off;
worker_processes %d;
pid %s/nginx.pid;
error_log %s/nginx-error.log warn;
`, workers, dir, dir)
	if foreground {
		b.WriteString("master_process off;\n")
	}
	fmt.Fprintf(&b, `
events {
    worker_connections 1024;
}

http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;

    upstream backend {
        server %[2]s;
        keepalive 64;
    }

    limit_req_zone $http_x_api_key zone=allow:16m rate=%[3]s;
    limit_req_zone $http_x_api_key zone=deny:16m rate=%[4]s;
    limit_req_status 429;
    # Denials are logged at info, below error_log's level: like the
    # gateway, nginx writes nothing per denied request.
    limit_req_log_level info;

    # The gateway adds X-Forwarded-*; so does this peer.
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host $host;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_set_header X-Forwarded-Host $host;
`, dir, upstream, nginxAllowRate, nginxDenyRate)
	for _, s := range servers {
		fmt.Fprintf(&b, "\n    server {\n        listen 127.0.0.1:%d;\n        location / {\n", s.port)
		switch s.limit {
		case "allow":
			fmt.Fprintf(&b, "            limit_req zone=allow burst=%d nodelay;\n", nginxAllowBurs)
		case "deny":
			b.WriteString("            limit_req zone=deny;\n")
		}
		b.WriteString("            proxy_pass http://backend;\n        }\n    }\n")
	}
	b.WriteString("}\n")
	return b.String()
}
