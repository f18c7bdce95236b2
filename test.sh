#!/usr/bin/env bash
# Runs Tollgate's whole test suite: format and vet checks, every unit,
# integration and end-to-end test under the race detector (the integration
# tests start their own redis-server, redis-sentinel and Redis Cluster
# processes on free loopback ports; the dashboard test drives headless
# Chromium), staticcheck, the Helm chart's tests, static builds for
# linux/amd64 and arm64, and govulncheck.
#
# Every check it promises either runs or fails the run. It installs the
# Debian packages it needs when they are missing (as root, or with
# passwordless sudo): redis-server, redis-sentinel and redis-tools for the
# integration tests, curl and chromium for the HTTP/2 and dashboard tests,
# and gcc (package build-essential) because the race detector needs cgo
# and a C compiler. Without root it stops and names the packages. helm is
# installed with go install by the chart's tests when it is not on PATH.
#
# govulncheck reads the Go vulnerability database from vuln.go.dev. When
# that host cannot be reached, the same database is read from the
# golang.org/x/vulndb module (its data/osv directory) fetched through the Go
# module proxy. Only when both fail does the check not run, and then the
# run fails unless TOLLGATE_SKIP_VULNCHECK=1 says to skip it.
#
# The go and toolchain lines of go.mod pick the Go release: the toolchain
# line names the patch release the suite (and govulncheck) runs with; the go
# command downloads it through the module proxy when the installed Go is
# older, unless GOTOOLCHAIN is set in the environment.
set -euo pipefail
cd "$(dirname "$0")"

# An installed Go whose go.env says GOTOOLCHAIN=local (Debian's does) would
# test with an older patch release than go.mod names; an explicit
# GOTOOLCHAIN in the environment still wins.
export GOTOOLCHAIN="${GOTOOLCHAIN:-local+auto}"

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || [ -x /usr/bin/redis-sentinel ] || need+=(redis-sentinel)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
# e2e.TestCurlHTTP2 drives the gateway with curl --http2.
command -v curl >/dev/null 2>&1 || need+=(curl)
# e2e.TestDashboardMatchesMetrics drives the dashboard in headless Chromium.
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
# -race needs cgo, which needs a C compiler.
cc=$(go env CC)
command -v "${cc:-gcc}" >/dev/null 2>&1 || need+=(build-essential)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then sudo=(); elif sudo -n true 2>/dev/null; then sudo=(sudo -n); else
    echo "test.sh: missing ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "test.sh: installing ${need[*]} from apt" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ "$(go env CGO_ENABLED)" != 1 ]; then
  echo "test.sh: the race detector needs cgo, but CGO_ENABLED=$(go env CGO_ENABLED);" \
    "install build-essential (gcc) and unset CGO_ENABLED" >&2
  exit 1
fi

echo "== gofmt" >&2
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bench/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:" >&2; echo "$unformatted" >&2; exit 1
fi

echo "== go vet" >&2
go vet ./...

# staticcheck finds what vet does not (dead code, a test comparing an
# expression with itself, deprecated calls); the tree is kept clean of it,
# and a finding fails the run. Installed with go install when missing.
echo "== staticcheck" >&2
gobin=$(go env GOBIN); gobin=${gobin:-$(go env GOPATH)/bin}
if [ ! -x "$gobin/staticcheck" ] && ! go install honnef.co/go/tools/cmd/staticcheck@v0.8.2; then
  echo "staticcheck NOT RUN: cannot install honnef.co/go/tools/cmd/staticcheck@v0.8.2 through the module proxy" >&2
  exit 1
fi
"$gobin/staticcheck" ./...

echo "== go test -race" >&2
go test -race -count=1 -timeout 25m -p 2 ./...

# The Helm chart: helm lint and helm template with every values file, the
# manifests decoded strictly into the Kubernetes API types, and the rendered
# configuration validated by the gateway. Its own module (the Kubernetes
# types stay out of the gateway's dependencies); it installs helm with
# go install when helm is not on PATH.
echo "== helm chart" >&2
(cd deploy/helm/test && go vet ./... && go test -count=1 -timeout 15m ./...)

# The benchmark programs with modules of their own (they import go-redis
# or a peer library the gateway does not): built and vetted, so that the
# commands BENCHMARKS.md gives still run.
echo "== benchmark modules" >&2
for mod in bench/fleetbench bench/redispeers; do
  (cd "$mod" && go vet ./... && go build -o /dev/null .)
done

# The Dockerfile's build, for both image architectures: a static binary
# (no cgo) per GOARCH, checked to be an ELF file for that machine.
echo "== static builds (linux/amd64, linux/arm64)" >&2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for arch in amd64 arm64; do
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w -X main.version=test" \
    -o "$out/gateway-$arch" ./cmd/gateway
  # e_machine, bytes 18-19 of the ELF header: 0x3e x86-64, 0xb7 AArch64.
  machine=$(od -An -tx1 -j18 -N2 "$out/gateway-$arch" | tr -d ' \n')
  case "$arch/$machine" in
    amd64/3e00|arm64/b700) ;;
    *) echo "static build for $arch is not an ELF for that machine (e_machine $machine)" >&2; exit 1 ;;
  esac
  if grep -aq 'ld-linux' "$out/gateway-$arch"; then
    echo "static build for $arch names a dynamic loader: it is not static" >&2; exit 1
  fi
done
host=$out/gateway-$(go env GOARCH)
if [ -x "$host" ]; then "$host" --help >/dev/null; fi

echo "== govulncheck" >&2
if [ "${TOLLGATE_SKIP_VULNCHECK:-}" = 1 ]; then
  echo "govulncheck SKIPPED: TOLLGATE_SKIP_VULNCHECK=1 (the suite did not check for known vulnerabilities)" >&2
else
  if [ ! -x "$gobin/govulncheck" ] && ! go install golang.org/x/vuln/cmd/govulncheck@v1.1.4; then
    echo "govulncheck NOT RUN: cannot install golang.org/x/vuln/cmd/govulncheck;" \
      "set TOLLGATE_SKIP_VULNCHECK=1 to run the suite without it" >&2
    exit 1
  fi
  db=https://vuln.go.dev
  if ! curl -fsSI --max-time 10 "$db/index/db.json" >/dev/null 2>&1; then
    # The module proxy serves the database's source repository as a module;
    # its data/osv directory is a flat OSV database govulncheck reads as is.
    dir=$(go mod download -json golang.org/x/vulndb@latest 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || true
    if [ -z "$dir" ] || [ ! -d "$dir/data/osv" ]; then
      echo "govulncheck NOT RUN: neither vuln.go.dev nor golang.org/x/vulndb (module proxy) is reachable;" \
        "set TOLLGATE_SKIP_VULNCHECK=1 to run the suite without it" >&2
      exit 1
    fi
    echo "vuln.go.dev unreachable; reading the database from $(basename "$dir") via the module proxy" >&2
    db="file://$dir/data/osv"
  fi
  "$gobin/govulncheck" -db "$db" ./...
fi
echo "== all tests passed" >&2
