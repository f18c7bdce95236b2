package main

import "testing"

// TestParseH2load reads h2load's summary: 2xx answers apart from the
// others, failed and errored requests together.
func TestParseH2load(t *testing.T) {
	out := `finished in 5.00s, 23456.80 req/s, 3.42MB/s
requests: 117300 total, 117316 started, 117300 done, 117290 succeeded, 6 failed, 4 errored, 0 timeout
status codes: 117284 2xx, 0 3xx, 6 4xx, 0 5xx
traffic: 17.11MB (17941184) total, 1.23MB (1289000) headers (space savings 90.00%), 1.57MB (1642200) data
                     min         max         mean         sd        +/- sd
time for request:      118us     31.05ms      6.73ms      3.41ms    71.62%
`
	r, err := parseH2load(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.rps != 23456.80 || r.succeeded != 117284 || r.non2xx != 6 || r.failed != 10 || r.meanLat != "6.73ms" {
		t.Errorf("parseH2load = %+v", r)
	}
	if _, err := parseH2load("connect failed\n"); err == nil {
		t.Error("unparsable output accepted")
	}
}
