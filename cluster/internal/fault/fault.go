// Package fault names the faults the simulator puts into a node on
// purpose, to prove that its checks catch them. It is internal to the
// cluster's packages, so nothing outside them can name a fault, and no
// production path sets one: a node's Config holds its limits only.
package fault

// Faults are the faults of one node.
type Faults struct {
	// SendBeforePersist breaks raft's ordering rule: the Ready's writes
	// are committed without fsync, messages go out at once, and the fsync
	// comes only every fourth tick.
	SendBeforePersist bool
}
