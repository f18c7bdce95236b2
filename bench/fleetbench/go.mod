module github.com/tollgate/gateway/bench/fleetbench

go 1.26.8

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/tollgate/gateway v0.0.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/tollgate/gateway => ../..
