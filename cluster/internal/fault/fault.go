// Package fault names the faults the simulator puts into a node on
// purpose, to prove that its checks catch them, and the fault-injection
// switches a test turns on in a real node through its environment. It is
// internal to the cluster's packages, so nothing outside them can name a
// fault, and no production path sets one: a node's Config holds its
// limits only.
package fault

import (
	"os"

	"tally/store"
)

// Faults are the faults of one node.
type Faults struct {
	// SendBeforePersist breaks raft's ordering rule: the Ready's writes
	// are committed without fsync, messages go out at once, and the fsync
	// comes only every fourth tick.
	SendBeforePersist bool
}

// FreezeControlLoopEnv is the environment variable that, set to 1, turns
// on Node.FreezeControlLoop in a node (a fault-injection switch for
// tests; docs/CLUSTER.md "Liveness").
const FreezeControlLoopEnv = "TALLY_FAULT_FREEZE_CONTROL_LOOP"

// MuteReportsEnv is the environment variable that, set to 1, turns on
// Node.MuteReports in a node (a fault-injection switch for tests;
// docs/CLUSTER.md "Liveness").
const MuteReportsEnv = "TALLY_FAULT_MUTE_REPORTS"

// HoldMovesEnv is the environment variable that, set to 1, turns on
// Node.HoldMoves in a node (a fault-injection switch for tests).
const HoldMovesEnv = "TALLY_FAULT_HOLD_MOVES"

// Node are the fault-injection switches of a cluster node.
type Node struct {
	// HoldMoves: the node's mover takes no move past proven (it does not
	// activate one), as a mover whose activation is lost every time; the
	// move stays there until aborted.
	HoldMoves bool
	// MuteReports: the failure detector sends none of its reports to
	// another node (the meta group's leader, or one passing them on), as
	// if every one were lost, while the node gossips, answers probes and
	// serves: a deciding table elsewhere never hears it.
	MuteReports bool
	// FreezeControlLoop: the failure detector counts no turn of the
	// node's control loop, so its progress witness never advances, while
	// the node runs, answers its probes and reports: a node that is busy
	// elsewhere and does none of its work.
	FreezeControlLoop bool
}

// FromEnv reads a node's switches from its environment.
func FromEnv() Node {
	return Node{FreezeControlLoop: os.Getenv(FreezeControlLoopEnv) == "1", MuteReports: os.Getenv(MuteReportsEnv) == "1",
		HoldMoves: os.Getenv(HoldMovesEnv) == "1"}
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
