//go:build !race

package chaintest

const raceEnabled = false
