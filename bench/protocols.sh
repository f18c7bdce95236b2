#!/bin/sh
# Listener protocols benchmark: Tollgate and nginx over HTTP/1.1, h2c and
# HTTP/2 over TLS, driven by h2load; CPU per request of each server.
#
#   bench/protocols.sh                       full run (~2 minutes), table written into docs/benchmarks/peer-nginx.md
#   bench/protocols.sh -write '' -rounds 1   quick look, print only
#
# Needs go, nginx and h2load (apt-get install nginx nghttp2-client). Every
# flag is passed on to `peerbench protocols` (go run ./bench/cmd/peerbench
# protocols -h lists them).
set -eu
cd "$(dirname "$0")/.."
export PEERBENCH_CMD="bench/protocols.sh${*:+ $*}"
exec go run ./bench/cmd/peerbench protocols -write docs/benchmarks/peer-nginx.md "$@"
