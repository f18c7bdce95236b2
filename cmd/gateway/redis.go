package main

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"
)

// newRedisClient builds the go-redis client for the Redis store from the
// [store.redis] settings: a Cluster client when cluster seed addresses are
// given, a Sentinel failover client when a master name is given, otherwise a
// standalone client parsed from url (redis:// or rediss:// for TLS).
// username and password (from the environment, never from the TOML) override
// any credentials in url when non-empty.
//
// Every client honours the caller's context deadline on the socket
// (ContextTimeoutEnabled), so store.timeout really bounds a call; dial, read
// and write timeouts are derived from timeout as a second guard. Commands
// are never retried by the client (MaxRetries -1): an EVALSHA whose reply
// was lost may have been applied, and retrying it would count twice. Cluster
// redirections (MOVED/ASK), which mean the command did not run, are still
// followed.
func newRedisClient(url string, cluster []string, sentinelMaster string, sentinelAddrs []string,
	username, password string, timeout time.Duration) (redis.UniversalClient, error) {
	if timeout <= 0 {
		timeout = 50 * time.Millisecond
	}
	dial := max(4*timeout, 250*time.Millisecond)
	io := max(2*timeout, 100*time.Millisecond)
	// A call holds a connection for about one round trip; with the socket
	// bounded by timeout, 10 connections per CPU serve tens of thousands of
	// decisions per second. Waiting for a connection is bounded by the
	// call's own deadline (PoolTimeout is a backstop).
	poolSize := 10 * runtime.GOMAXPROCS(0)
	switch {
	case len(cluster) > 0 && sentinelMaster != "":
		return nil, errors.New("store.redis: set either cluster or sentinel, not both")
	case len(cluster) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 cluster,
			Username:              username,
			Password:              password,
			DialTimeout:           dial,
			ReadTimeout:           io,
			WriteTimeout:          io,
			PoolTimeout:           io,
			PoolSize:              poolSize,
			MaxRetries:            -1,
			MaxRedirects:          3,
			ContextTimeoutEnabled: true,
		}), nil
	case sentinelMaster != "":
		if len(sentinelAddrs) == 0 {
			return nil, errors.New("store.redis.sentinel: addrs is required with master")
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            sentinelMaster,
			SentinelAddrs:         sentinelAddrs,
			Username:              username,
			Password:              password,
			SentinelUsername:      username,
			SentinelPassword:      password,
			DialTimeout:           dial,
			ReadTimeout:           io,
			WriteTimeout:          io,
			PoolTimeout:           io,
			PoolSize:              poolSize,
			MaxRetries:            -1,
			ContextTimeoutEnabled: true,
		}), nil
	}
	if url == "" {
		return nil, errors.New("store.redis: url, cluster or sentinel is required")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		// ParseURL's errors never echo the password, but keep ours generic.
		return nil, fmt.Errorf("store.redis.url: %w", err)
	}
	if username != "" {
		opt.Username = username
	}
	if password != "" {
		opt.Password = password
	}
	opt.DialTimeout = dial
	opt.ReadTimeout = io
	opt.WriteTimeout = io
	opt.PoolTimeout = io
	opt.PoolSize = poolSize
	opt.MaxRetries = -1
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}
