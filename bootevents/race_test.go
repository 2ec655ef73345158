//go:build race

package bootevents_test

// raceEnabled: the race detector allocates beside the code under test.
const raceEnabled = true
