#!/bin/sh
# Peer benchmark: Tollgate beside the floor of its stack (bench/floor) and
# nginx on loopback, driven by wrk.
#
#   bench/peer.sh                      full run (~5-6 minutes), table written into docs/benchmarks/peer-nginx.md
#   bench/peer.sh -write '' -rounds 1  quick look, print only
#
# Needs go, wrk, nginx, redis-server (apt-get install wrk nginx redis-server)
# and, for instructions per request, valgrind. Every flag is passed on to
# bench/cmd/peerbench (go run ./bench/cmd/peerbench -h lists them).
set -eu
cd "$(dirname "$0")/.."
export PEERBENCH_CMD="bench/peer.sh${*:+ $*}"
exec go run ./bench/cmd/peerbench -write docs/benchmarks/peer-nginx.md "$@"
