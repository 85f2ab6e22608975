// Package fault names the faults the simulator puts into a node on
// purpose, to prove that its checks catch them. It is internal to the
// cluster's packages, so nothing outside them can name a fault, and no
// production path sets one: a node's Config holds its limits only.
package fault

import "tally/store"

// Faults are the faults of one node.
type Faults struct {
	// SendBeforePersist breaks raft's ordering rule: the Ready's writes
	// are committed without fsync, messages go out at once, and the fsync
	// comes only every fourth tick.
	SendBeforePersist bool
}

// Replica is the fault put into a node's replica (replica.SM.Inject).
type Replica struct {
	// BeforeSync, when set, is called in each data group's batch after its
	// commands have written their sessions' logs and before those are
	// fsynced, with where each session stood before the batch (its
	// intent, durable). An error ends the batch there, and stops the node,
	// as a crash at that point would: the simulator's way to crash a node
	// while its sessions' logs hold writes that are not durable.
	BeforeSync func(group uint64, before map[string]store.Position) error
}
