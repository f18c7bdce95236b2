#!/usr/bin/env bash
# Runs Tollgate's whole test suite: format and vet checks, every unit,
# integration and end-to-end test under the race detector (the integration
# tests start their own redis-server, redis-sentinel and Redis Cluster
# processes on free loopback ports), and govulncheck.
#
# Installs the Debian packages redis-server, redis-sentinel and redis-tools
# when they are missing (as root, or with passwordless sudo).
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || [ -x /usr/bin/redis-sentinel ] || need+=(redis-sentinel)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then sudo=(); elif sudo -n true 2>/dev/null; then sudo=(sudo -n); else
    echo "test.sh: missing ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "test.sh: installing ${need[*]} from apt" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi

echo "== gofmt" >&2
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bench/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:" >&2; echo "$unformatted" >&2; exit 1
fi

echo "== go vet" >&2
go vet ./...

echo "== go test -race" >&2
go test -race -count=1 -timeout 25m -p 2 ./...

echo "== govulncheck" >&2
gobin=$(go env GOPATH)/bin
if [ ! -x "$gobin/govulncheck" ]; then
  go install golang.org/x/vuln/cmd/govulncheck@v1.1.4
fi
if getent hosts vuln.go.dev >/dev/null 2>&1; then
  "$gobin/govulncheck" ./...
else
  # The vulnerability database is a separate service from the module proxy;
  # on a network that cannot reach it we say so loudly instead of passing.
  echo "govulncheck NOT RUN: vuln.go.dev is unreachable from this network" >&2
fi
echo "== all tests passed" >&2
