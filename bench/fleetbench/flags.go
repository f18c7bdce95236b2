package main

import "flag"

// childFlags are the -hybrid parameters passed to each gateway process.
type childFlags struct {
	alg          string
	limit, lease int64
	start        int64
	prefix       string
}

var cf childFlags

func init() {
	flag.StringVar(&cf.alg, "alg", "fixed_window", "internal (-child): algorithm of the hot limit")
	flag.Int64Var(&cf.limit, "limit", 10000, "internal (-child): the hot limit per second")
	flag.Int64Var(&cf.lease, "lease", 100, "internal (-child): lease_size")
	flag.Int64Var(&cf.start, "start", 0, "internal (-child): start instant, µs since the epoch")
	flag.StringVar(&cf.prefix, "prefix", "h:", "internal (-child): key prefix")
}

func flagsOfChild() childFlags { return cf }
