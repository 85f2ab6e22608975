// Package priority holds the scale of work's priorities that promises and
// claims share, as beads users know it: 0 is the highest, Max the lowest,
// and work that records none has Default. Stored in logs: do not change.
package priority

const (
	Default = 2
	Max     = 4
)
