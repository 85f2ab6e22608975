// Package sim is a deterministic simulator for the cluster engine. One seed
// runs several real nodes in one goroutine: cluster/node's loop over
// cluster/raftlog on an in-memory pebble file system behind a
// fault-injecting wrapper, with tally's real state machine, cluster/replica,
// running the Service methods every node registers (cluster.Methods) on each
// node's own session ledgers, which package store writes to a directory of
// the node's on the real file system (tmpfs when there is one). Clients
// write as a node does: the same command (cluster.NewCommand, with the
// proposer's instant from the virtual clock and the id seed from the seed's
// generator) proposed to the group the replica's routing picks
// (replica.SM.GroupOf); they read with ReadIndex and then the replica's
// Service. One operation in five is of the other families, in sessions of
// their own: expectations raised and the facts that satisfy them (in time,
// late, or never), claims created, posted, received and given an artifact
// (its bytes staged, then published). Each node runs the timekeeper as a
// node does (cluster.DueSweeps on the virtual clock, for the groups it
// leads), sometimes proposing a sweep twice, and a tokener creates and
// revokes the cluster's tokens through the meta group. On two seeds in
// three a placer places the first session in another group than its
// hash's, as tally cluster place does (a Fence in its hash's group, then
// placement.set in the meta group), racing the clients' first writes to it
// or before them; clients refused as moved retry. Time is virtual, the network simulated, and faults injected:
// message loss, delay, duplication and reordering; partitions, including
// one-way ones; crashes that lose every unsynced write (the raft store's,
// and the tail a batch wrote to its sessions' logs before their fsync, cut
// anywhere down to what the replica had made durable, mid-line included),
// and restarts; failed disk writes and syncs; leader transfers; membership
// changes. The session logs' own disk does not fail, and a crash keeps
// every file and directory entry the replica made (only their unsynced
// bytes go).
//
// It checks, during the run and at its end, that no term has two leaders;
// that replicas' session logs never diverge (each a prefix of the longest,
// byte for byte) and end identical, with the same chain heads, and whole
// by the Service's verify (what `tally verify` runs); that every
// acknowledged write is in its session exactly once, at the sequence it was
// acknowledged with; that the meta group's replicas hold the same
// directory, a placement recorded has its session fenced on every replica
// of its hash's group and its log held by the group it is placed in; that
// the promise clients' history is linearizable (porcupine, against
// cluster/model's Ledger); and, of the other families, by the state every
// replica ends with: each lapse held once under its deterministic id, none
// of an expectation satisfied before its due and one of each never
// satisfied, each claim in the state its steps left it or Expired by one
// deadline fact, each artifact's bytes on every replica, and the meta
// group's replicas holding the same token table, which authenticates
// exactly the secrets not revoked.
//
// A run depends only on its seed, provided the process's cryptographic
// randomness is seeded too (raft draws its election timeouts from it, and
// the tokener mints its secrets from it; see
// testing/cryptotest.SetGlobalRandom). Nothing the replicas decide reads
// the wall clock: a command is applied at its proposer's instant, the
// replica's session cache runs on the virtual clock, and a command's ids
// come from its seed.
package sim

import (
	"time"
)

// Options shape one run.
type Options struct {
	Seed     uint64
	Nodes    int           // 3 or 5
	Voters   int           // initial voters of every group (the rest join later); 0 means all
	Groups   int           // data groups, besides the meta group
	Clients  int           // concurrent clients
	Sessions int           // sessions of tenant "sim", each in the data group the replica's routing gives it
	Chaos    time.Duration // virtual time with faults
	Quiesce  time.Duration // virtual time after, healed, for catch-up
	// SendBeforePersist breaks raft's ordering rule in every node, to show
	// the checks catch it.
	SendBeforePersist bool
	// Place places the first session in another group than its hash's
	// (PlaceRace, PlaceFirst; place.go), or not (PlaceNone).
	Place int
	// Families is the percent of the clients' operations that are of the
	// other families (family.go), half expectations raised, half claims'
	// steps, besides the facts they record when due.
	Families int
	// Pause is the range of a client's pause between two operations.
	Pause [2]time.Duration
	// Placement makes the membership changes placement's, with a node
	// marked dead and one drained among the faults (placement.go).
	Placement bool
	// Liveness, on a placement run, has no node marked dead by hand: the
	// failure detector's deciding table commits dead and alive facts
	// from the members' modelled reports (liveness.go).
	Liveness bool
	// Custody runs evidence custody (custody.go): artifacts published
	// beside the log, fetched, receipted, scrubbed; CustodyPolicy is the
	// required copies (replica.CustodyAll when empty); Corrupt corrupts
	// stored copies among the faults.
	Custody       bool
	CustodyPolicy string
	Corrupt       bool
	// beginWithoutCustody breaks the rule that a check begins only once
	// custody is whole, to show the custody checks catch it.
	beginWithoutCustody bool
	// receiptUnverified breaks the rule that a node receipts only a copy
	// that verified, to show the custody checks catch it.
	receiptUnverified bool
	// Move moves the first session to another data group through the
	// faults (move.go).
	Move bool
	// moveSkipFence breaks the move: the mover records the source's end
	// without fencing it, to show the checks catch it.
	moveSkipFence bool
	// Driver, on a placement run, has the real placement driver make the
	// membership changes, with the operator's requests (members added, a
	// node marked dead, one drained) among the faults (driver.go).
	Driver bool
	// driverDropsRecords breaks the driver: no group's configuration is
	// recorded in the meta group, to show the driver's checks catch it.
	driverDropsRecords bool
	// placeOnSuspicion breaks the rule that a suspicion alone changes no
	// placement: the placer also takes a node the decider suspects for
	// dead, to show the liveness checks catch it.
	placeOnSuspicion bool
}

// DefaultOptions is the run the test suite uses per seed.
func DefaultOptions(seed uint64) Options {
	return Options{Seed: seed, Nodes: 3, Groups: 2, Clients: 4, Sessions: 4, Chaos: 3 * time.Second, Quiesce: 4 * time.Second,
		Place: []int{PlaceFirst, PlaceNone, PlaceRace}[seed%3], Families: 20, Pause: [2]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}}
}

// Stats describe a finished run.
type Stats struct {
	Virtual    time.Duration
	Ops        int // completed client operations
	Writes     int // acknowledged declarations and resolutions
	Reads      int
	Crashes    int
	Unsynced   int // crashes between a batch's session writes and their fsync
	Torn       int // session logs those crashes cut mid-line
	DiskFaults int
	Partitions int
	Transfers  int
	Membership int // membership changes applied
	// Decisions are the placement rule's changes applied; MarkedDead and
	// Drained the nodes so marked (placement runs).
	Decisions, MarkedDead, Drained int
	// Added counts the nodes recorded as members in the middle of the
	// faults (driver runs).
	Added int
	// Joint counts the driver's joint changes made (a learner promoted
	// and the voter it replaces removed at once).
	Joint     int
	Messages  int
	Snapshots int // snapshot streams started
	// SnapshotsFailed counts the streams lost on the way, cut, or whose
	// acknowledgment was lost, each reported to its sender as a failure;
	// SnapshotsStale, those of them whose manifest named a staged upload
	// used (its file removed) before the body was written.
	SnapshotsFailed, SnapshotsStale int
	// Placements recorded, and refused (the session had records first);
	// Moved counts the clients' attempts refused as moved.
	Placements, PlacementsRefused, Moved int
	// Expectations raised and Facts recorded (acknowledged); Lapses
	// committed, as the replicas end; Sweeps committed that committed
	// something, and SweepsEmpty that found nothing left to commit (a
	// repeat, or a race with another).
	Expectations, Facts, Lapses, Sweeps, SweepsEmpty int
	// Claims created; ClaimsRefused, a step refused once the claim's
	// deadline passed; Expired, the claims the timekeeper expired;
	// Artifacts published, their bytes staged first.
	Claims, ClaimsRefused, Expired, Artifacts int
	// Tokens created, and TokensRevoked, in the meta group; MetaSnapshots
	// of the meta group sent.
	Tokens, TokensRevoked, MetaSnapshots int
	// MovesActivated and MovesAborted end the mover's move (move runs);
	// MoveStreamsLost are the installs' fetches the faults lost.
	MovesActivated, MovesAborted, MoveStreamsLost int
	// Live counts the failure detector's work (liveness runs).
	Live  LiveStats
	Trace uint64 // a hash of the run's events, equal for equal runs

	// Custody counts evidence custody's work (custody runs).
	Custody CustodyStats
}
