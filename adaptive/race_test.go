//go:build race

package adaptive_test

// raceEnabled is set under the race detector, which slows the simulated
// queues tenfold: the property tests then run fewer trials.
const raceEnabled = true
