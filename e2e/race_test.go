//go:build race

package e2e

// raceEnabled: this test binary runs under the race detector, so the
// gateway is built with -race too.
const raceEnabled = true
